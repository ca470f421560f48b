"""User accounts (database "Account"): tokens, registration, deletion, passwords."""

from __future__ import annotations

import random
import string

from apibank_bench.apis.base import LEVEL12, Api, enveloped


class _NoApiName(Api):
    """Quirk: upstream's results for these APIs have no 'api_name' key."""

    def envelope(self, inputs, output, exception):
        return {"input": inputs, "output": output, "exception": exception}


@LEVEL12.register_api
class CheckToken(_NoApiName):
    # Upstream takes the database only (it is itself the token checker).
    def __init__(self, init_database=None) -> None:
        super().__init__(init_database)

    def check_token(self, token):
        """The username whose token this is; the interface every token checker offers."""
        for username, account in self.database.items():
            if account["token"] == token:
                return username
        raise Exception("The token is invalid.")

    @enveloped
    def call(self, token):
        return {"username": self.check_token(token)}


@LEVEL12.register_api
class GetUserToken(Api):
    def __init__(self, init_database=None) -> None:
        super().__init__(init_database)

    @enveloped
    def call(self, username, password):
        return {"token": self._token(username, password)}

    def _token(self, username, password):
        if username not in self.database:
            raise Exception("The username does not exist.")
        if self.database[username]["password"] != password:
            raise Exception("The password is incorrect.")
        return self.database[username]["token"]


@LEVEL12.register_api
class RegisterUser(_NoApiName):
    def __init__(self, init_database=None) -> None:
        super().__init__(init_database)

    @enveloped
    def call(self, username, password, email):
        return {"token": self._register(username, password, email)}

    def _register(self, username, password, email):
        if username in self.database:
            raise Exception("The username already exists.")
        # Same draw as upstream (18 letters/digits, lower-cased) so seeded runs agree.
        token = "".join(random.choices(string.ascii_letters + string.digits, k=18)).lower()
        self.database[username] = {"password": password, "token": token, "email": email}
        return token

    def check_api_call_correctness(self, response, groundtruth):
        # Quirk: the (random) token is never compared; only a token where the gold
        # has none fails.
        if groundtruth["output"] is None and response["output"] is not None:
            return False
        return response["input"] == groundtruth["input"] and response["exception"] == groundtruth["exception"]


@LEVEL12.register_api
class DeleteAccount(_NoApiName):
    @enveloped
    def call(self, token):
        return {"status": self._delete(token)}

    def _delete(self, token):
        if self.token_checker is None:
            raise Exception("Lack of token checker.")
        username = self.token_checker.check_token(token)
        # Quirk: deletes from this API's own copy only; the token checker still knows the user.
        if username in self.database:
            del self.database[username]
            return "success"
        raise Exception("No such user.")


@LEVEL12.register_api
class ModifyPassword(Api):
    @enveloped
    def call(self, token, old_password, new_password):
        return {"status": self._modify(token, old_password, new_password)}

    def _modify(self, token, old_password, new_password):
        # Quirk: no None-check of the token checker (AttributeError text becomes the
        # exception), and a user unknown to this copy gives a KeyError text.
        username = self.token_checker.check_token(token)
        account = self.database[username]
        if account["password"] != old_password:
            raise Exception("The old password is incorrect.")
        account["password"] = new_password
        return "success"

    def check_api_call_correctness(self, response, groundtruth):
        # Upstream compares in this order: input, exception, output.
        return (
            response["input"] == groundtruth["input"]
            and response["exception"] == groundtruth["exception"]
            and response["output"] == groundtruth["output"]
        )


@LEVEL12.register_api
class ForgotPassword(_NoApiName):
    """Two steps: 'Forgot Password' issues a code, 'Verification Code' uses it."""

    FIXED_CODE = 970420  # quirk: upstream always issues this code (its random draw is disabled)

    def __init__(self, init_database=None) -> None:
        super().__init__(init_database)
        self.verification_code = None
        self.username = None

    # Quirk: any keyword is accepted and echoed in 'input'.
    @enveloped
    def call(self, status, **kwargs):
        return self._step(status, kwargs)

    def _step(self, status, kwargs):
        if status == "Forgot Password":
            if "username" not in kwargs or "email" not in kwargs:
                raise Exception("The username and email are required for the first call.")
            username = kwargs["username"]
            if username not in self.database:
                raise Exception("The username does not exist.")
            if self.database[username]["email"] != kwargs["email"]:
                raise Exception("The email is incorrect.")
            self.verification_code = self.FIXED_CODE
            self.username = username
            return self.verification_code  # quirk: the bare code is the output, not a dict
        if status == "Verification Code":
            if not self.verification_code:
                raise Exception("You need to call the API with status 'Forgot Password' at first.")
            if "new_password" not in kwargs or "verification_code" not in kwargs:
                raise Exception("The new password and verification code are required for the second call.")
            if not self.verification_code == kwargs["verification_code"]:
                raise Exception("The verification code is incorrect.")
            # Quirk: the code stays valid, so the password can be reset again.
            self.database[self.username]["password"] = kwargs["new_password"]
            return "success"
        raise Exception("The status is only 'Forgot Password' or 'Verification Code'.")
