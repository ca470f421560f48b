"""Looking things up: Dictionary (online only), DocumentQA ("QuestionAnswering"),
Wiki ("Wiki"), QueryHistoryToday ("History") and SearchEngine ("SearchEngine")."""

from __future__ import annotations

import datetime

from apibank_bench.apis.base import LEVEL12, Api, enveloped
from apibank_bench.apis.level12._text_search import Bm25Okapi, word_tokens


@LEVEL12.register_api
class Dictionary(Api):
    """Offline: upstream asks a public web dictionary for every keyword, so no result
    can be reproduced here; every well-formed call reports that the network is needed."""

    def __init__(self, init_database=None) -> None:
        super().__init__(init_database)

    @enveloped
    def call(self, keyword):
        return self.search(keyword)

    def search(self, keyword):
        # Upstream's local normalisation runs first (a non-string keyword fails here
        # with the same AttributeError); only the web request is replaced.
        keyword.replace("_", " ").strip().lower()
        raise Exception("Dictionary needs an online dictionary service and is unavailable offline.")

    def check_api_call_correctness(self, response, groundtruth) -> bool:
        # Quirk: the input is ignored; the API name is compared with this class's own.
        return (
            response["api_name"] == type(self).__name__
            and response["output"] == groundtruth["output"]
            and response["exception"] == groundtruth["exception"]
        )


@LEVEL12.register_api
class DocumentQA(Api):
    def __init__(self, init_database=None) -> None:
        super().__init__(init_database)

    @enveloped
    def call(self, url, question):
        return self.answer(url, question)

    def answer(self, url, question):
        url, question = url.strip(), question.strip()
        if question == "":
            raise Exception("The question is empty.")
        if url not in self.database:
            raise Exception("The document of this url failed to be processed.")
        entries = self.database[url]
        # Quirk: each document holds a list of {"question", "answer"} records, and a
        # question string is never *in* that list, so every known url answers this.
        if question not in entries:
            return "The question is too difficult to answer."
        return entries[question]

    def check_api_call_correctness(self, response, groundtruth) -> bool:
        return (
            response["input"]["url"].strip() == groundtruth["input"]["url"].strip()
            and response["input"]["question"].strip() == groundtruth["input"]["question"].strip()
            and response["output"] == groundtruth["output"]
            and response["exception"] == groundtruth["exception"]
        )


@LEVEL12.register_api
class Wiki(Api):
    def __init__(self, init_database=None) -> None:
        super().__init__(init_database)

    @enveloped
    def call(self, keyword):
        return self.search(keyword)

    def search(self, keyword):
        keyword = keyword.replace("_", " ").strip().lower()
        if keyword not in self.database:
            raise Exception("Keyword not found.")
        page = self.database[keyword]
        return {"url": page["url"], "summary": page["summary"]}  # the stored "content" is left out

    def check_api_call_correctness(self, response, groundtruth) -> bool:
        return (
            response["api_name"] == groundtruth["api_name"]
            and response["output"] == groundtruth["output"]
            and response["exception"] == groundtruth["exception"]
        )


def _history_day(date):
    """The day as %m-%d, from %Y-%m-%d (short years zero-padded) or %m-%d text.

    Quirk kept: when neither format parses, the %m-%d ValueError is *returned*;
    errors compare by identity, so two malformed dates never match in the check.
    """
    date = date.strip()
    parts = date.split("-")
    if len(parts) == 3:
        date = "-".join([parts[0].zfill(4)] + parts[1:])
    for fmt in ("%Y-%m-%d", "%m-%d"):
        try:
            parsed = datetime.datetime.strptime(date, fmt)
        except Exception as error:
            failure = error
        else:
            return parsed.strftime("%m-%d")
    return failure


@LEVEL12.register_api
class QueryHistoryToday(Api):
    def __init__(self, init_database=None) -> None:
        super().__init__(init_database)

    @enveloped
    def call(self, date):
        return self.history(date)

    def history(self, date):
        day = _history_day(date)
        if isinstance(day, ValueError):
            raise day
        if day not in self.database:
            raise Exception("The date is not in the database.")
        return [
            "Title: {}, Date: {}, Description: {}".format(
                event["Title"].strip(), event["Date"].strip(), event["Description"].strip()
            )
            for event in self.database[day]
        ]

    def check_api_call_correctness(self, response, groundtruth) -> bool:
        ours, theirs = _history_day(response["input"]["date"]), _history_day(groundtruth["input"]["date"])
        outputs = response["output"], groundtruth["output"]  # read before comparing, as upstream
        return ours == theirs and outputs[0] == outputs[1] and response["exception"] == groundtruth["exception"]


@LEVEL12.register_api
class SearchEngine(Api):
    """BM25 over the database's pre-tokenized documents; the two best documents."""

    def __init__(self, init_database=None) -> None:
        super().__init__(init_database)
        self.index = Bm25Okapi(self.database["tokenized_documents"])

    @enveloped
    def call(self, keyword):
        return self.search(keyword)

    def search(self, keyword):
        import numpy  # rank order among equal scores is numpy's argsort's, as upstream

        scores = self.index.scores(word_tokens(keyword.lower().strip()))
        best = numpy.argsort(-numpy.array(scores))[:2]
        return [self.database["raw_documents"][i] for i in best]

    def check_api_call_correctness(self, response, groundtruth) -> bool:
        if response["api_name"] != groundtruth["api_name"]:
            return False
        if response["exception"] != groundtruth["exception"]:
            return False
        # Quirk kept: a None output leaves its variable unset, so comparing it raises
        # UnboundLocalError (when either side is None), exactly as upstream.
        if response["output"] is not None:
            response_output = sorted(response["output"], key=_title_abstract, reverse=True)
        if groundtruth["output"] is not None:
            groundtruth_output = sorted(groundtruth["output"], key=_title_abstract, reverse=True)
        return response_output == groundtruth_output


def _title_abstract(document) -> str:
    return document["title"] + document["abstract"]
