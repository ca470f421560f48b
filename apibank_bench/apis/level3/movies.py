"""Level 3: movies (UserWatchedMovies, UserMoviePreferences, MovieRecommendations)."""

from __future__ import annotations

from apibank_bench.apis.base import LEVEL3, enveloped
from apibank_bench.apis.level3._common import InlineApi

_MATRIX_FIRST = ("The Matrix", "The Lord of the Rings", "The Dark Knight")
_RINGS_FIRST = ("The Lord of the Rings", "The Dark Knight", "The Matrix")


@LEVEL3.register_api
class UserWatchedMovies(InlineApi):
    def __init__(self) -> None:
        super().__init__()
        self.database = {
            "John": list(_MATRIX_FIRST),
            "Mary": list(_RINGS_FIRST),
            "Peter": list(_MATRIX_FIRST),
            "Tom": list(_RINGS_FIRST),
            "Jerry": list(_MATRIX_FIRST),
        }

    @enveloped
    def call(self, user_name: str) -> list:
        # The output is the bare list, not a dict.
        if user_name not in self.database:
            raise Exception("User not found.")
        return self.database[user_name]


@LEVEL3.register_api
class UserMoviePreferences(InlineApi):
    def __init__(self) -> None:
        super().__init__()
        self.database = {
            "John": ["Action", "Comedy", "Drama"],
            "Mary": ["Comedy", "Drama", "Romance"],
            "Peter": ["Action", "Drama", "Thriller"],
            "Tom": ["Action", "Comedy", "Drama"],
            "Jerry": ["Comedy", "Drama", "Romance"],
        }

    @enveloped
    def call(self, user_name: str) -> dict:
        # Unlike UserWatchedMovies, an unknown user fails with the KeyError's text.
        return {"preferences": self.database[user_name]}


@LEVEL3.register_api
class MovieRecommendations(InlineApi):
    def __init__(self) -> None:
        super().__init__()
        self.database = {
            "Action": ["The Dark Knight", "The Matrix", "The Lord of the Rings"],
            "Comedy": ["The Hangover", "Knives Out", "Deadpool"],
            "Drama": ["The Shawshank Redemption", "Forrest Gump", "Joker"],
            "Romance": ["Titanic", "La La Land", "The Notebook"],
            "Thriller": ["Inception", "Parasite", "Get Out"],
        }

    @enveloped
    def call(self, preferences: list) -> dict:
        # Quirk: watched movies are not filtered out despite the description, and
        # a string is iterated character by character (so "Action" fails on 'A').
        movies: list = []
        for genre in preferences:
            movies.extend(self.database[genre])
        return {"recommended_movies": movies}
