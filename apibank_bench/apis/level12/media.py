"""Recorded media lookups: ImageCaption ("ImageCaptioning") and SpeechRecognition
("SpeechRecognition"), both answered from their databases by url."""

from __future__ import annotations

from apibank_bench.apis.base import LEVEL12, Api, enveloped


def _same_input_output_exception(response, groundtruth) -> bool:
    return (
        response["input"] == groundtruth["input"]
        and response["output"] == groundtruth["output"]
        and response["exception"] == groundtruth["exception"]
    )


@LEVEL12.register_api
class ImageCaption(Api):
    def __init__(self, init_database=None) -> None:
        super().__init__(init_database)

    @enveloped
    def call(self, url):
        url = url.strip()
        if not url.endswith((".jpg", ".jpeg", ".png")):
            raise Exception("The url should end with .jpg, .jpeg or .png.")
        for image in self.database:  # a list of {"url", "caption"} records
            if image["url"] == url:
                return image["caption"]
        raise Exception("The image of this url failed to be processed.")

    def check_api_call_correctness(self, response, groundtruth) -> bool:
        return _same_input_output_exception(response, groundtruth)


@LEVEL12.register_api
class SpeechRecognition(Api):
    def __init__(self, init_database=None) -> None:
        super().__init__(init_database)

    @enveloped
    def call(self, url):
        url = url.strip()
        if not url.endswith(".wav"):
            raise Exception("The url should end with .wav.")
        if url not in self.database:
            raise Exception("The audio of this url failed to be processed.")
        return self.database[url]

    def check_api_call_correctness(self, response, groundtruth) -> bool:
        return _same_input_output_exception(response, groundtruth)
