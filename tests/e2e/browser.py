"""A browser for the sign-in tests: a cookie jar, redirects followed, the CAs it is given
trusted (corral's, and a provider's own where it serves HTTPS)."""

from __future__ import annotations

import http.cookiejar
import ssl
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any


class LoopbackIsSecure(http.cookiejar.DefaultCookiePolicy):
    """Browsers count http://127.0.0.1 as a secure context and send `Secure` cookies there
    (Keycloak's sign-in relies on it); Python's cookie jar does not unless told."""

    def return_ok_secure(self, cookie: http.cookiejar.Cookie, request: Any) -> bool:
        host = urllib.parse.urlsplit(request.get_full_url()).hostname
        return host == "127.0.0.1" or bool(super().return_ok_secure(cookie, request))


@dataclass
class Browser:
    """A cookie jar and redirects followed, as a browser does; `context`'s CAs trusted."""

    context: ssl.SSLContext

    def __post_init__(self) -> None:
        self.jar = http.cookiejar.CookieJar(LoopbackIsSecure())
        self.opener = urllib.request.build_opener(
            urllib.request.HTTPCookieProcessor(self.jar),
            urllib.request.HTTPSHandler(context=self.context),
        )

    def open(self, url: str, form: dict[str, str] | None = None) -> tuple[int, str, bytes]:
        data = urllib.parse.urlencode(form).encode() if form is not None else None
        try:
            with self.opener.open(url, data, timeout=30) as response:
                return response.status, response.geturl(), response.read()
        except urllib.error.HTTPError as error:
            return error.code, error.geturl(), error.read()

    def redirect_of(self, url: str, form: dict[str, str] | None = None) -> str:
        """Where the answer to a request (a form when given) redirects, not followed."""

        class Stay(urllib.request.HTTPRedirectHandler):
            def redirect_request(self, *_: Any) -> None:
                return None

        opener = urllib.request.build_opener(
            urllib.request.HTTPCookieProcessor(self.jar),
            urllib.request.HTTPSHandler(context=self.context),
            Stay(),
        )
        data = urllib.parse.urlencode(form).encode() if form is not None else None
        try:
            opener.open(url, data, timeout=30)
        except urllib.error.HTTPError as error:
            assert error.code in (302, 303), error.code
            return str(error.headers["Location"])
        raise AssertionError("no redirect")

    def cookie(self, name: str) -> str | None:
        return next((c.value for c in self.jar if c.name == name), None)
