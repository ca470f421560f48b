"""Level 3: users' posts and their likes (UserPosts, LikeCount)."""

from __future__ import annotations

from apibank_bench.apis.base import LEVEL3, enveloped
from apibank_bench.apis.level3._common import InlineApi


@LEVEL3.register_api
class UserPosts(InlineApi):
    def __init__(self) -> None:
        super().__init__()
        # User n wrote posts 3n-2, 3n-1 and 3n.
        self.database = {user: [3 * user - 2, 3 * user - 1, 3 * user] for user in range(1, 6)}

    @enveloped
    def call(self, user_id: int) -> dict:
        return {"post_ids": self.database[user_id]}


@LEVEL3.register_api
class LikeCount(InlineApi):
    def __init__(self) -> None:
        super().__init__()
        # Post n has 10n likes.
        self.database = {post: 10 * post for post in range(1, 16)}

    @enveloped
    def call(self, post_id: int) -> dict:
        if post_id not in self.database:
            raise Exception(f"Post with ID {post_id} does not exist.")
        return {"like_count": self.database[post_id]}
