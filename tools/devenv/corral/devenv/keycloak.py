"""Keycloak, a real OpenID Connect provider, on loopback: for the e2e tests of sign-in through
OpenID Connect and for trying it by hand.

`python -m corral.devenv.keycloak fetch` (`make keycloak`) downloads Keycloak's distribution
from Maven Central once into ~/.cache/corral/keycloak/, checks its SHA-1 (Maven Central's own
checksum, pinned here), unpacks it and runs Keycloak's one-off build step (20 s). `Keycloak`
then starts it in 10-20 s on a free port with a database of its own (H2 in a folder of the
run), and `configure` makes a realm, a confidential client, users and a group through its
admin REST API, as an administrator of any Keycloak would.

Keycloak 26 needs Java 21 or newer: the newest JDK under /usr/lib/jvm is used (JAVA_HOME
overrides it).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import secrets
import shutil
import subprocess
import sys
import urllib.parse
import urllib.request
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from corral.devenv.controlplane import free_port
from corral.devenv.process import Process
from corral.devenv.waiting import wait_for

VERSION = "26.7.3"
SHA1 = "1e21a7f572581692aacb379dbba8413f99b67208"
URL = (
    "https://repo1.maven.org/maven2/org/keycloak/keycloak-quarkus-dist/"
    f"{VERSION}/keycloak-quarkus-dist-{VERSION}.zip"
)
CACHE = Path.home() / ".cache" / "corral" / "keycloak"
HOME = CACHE / f"keycloak-{VERSION}"
BUILT = HOME / ".corral-built"
# 10-21 s on an idle machine; 158 s measured on 2 cores with several e2e runs beside it
# (2026-11-28, load average 14), where 120 s failed twice. Waiting returns once it answers.
START_TIMEOUT = 300.0
MIN_JAVA = 21


def java_home() -> Path:
    """JAVA_HOME, else the JDK under /usr/lib/jvm with the highest major version >= 21."""
    if os.environ.get("JAVA_HOME"):
        return Path(os.environ["JAVA_HOME"])
    found: list[tuple[int, Path]] = []
    for jdk in Path("/usr/lib/jvm").glob("*"):
        release = jdk / "release"
        if (jdk / "bin" / "java").exists() and release.exists() and not jdk.is_symlink():
            match = re.search(r'JAVA_VERSION="(\d+)', release.read_text(errors="replace"))
            if match:
                found.append((int(match.group(1)), jdk))
    best = max(found, default=None)
    if best is None or best[0] < MIN_JAVA:
        raise RuntimeError(f"Keycloak {VERSION} needs a JDK {MIN_JAVA}+ (set JAVA_HOME)")
    return best[1]


def fetch() -> Path:
    """The built distribution, downloaded and built when missing."""
    if BUILT.exists():
        return HOME
    CACHE.mkdir(parents=True, exist_ok=True)
    archive = CACHE / f"keycloak-quarkus-dist-{VERSION}.zip"
    if not archive.exists() or _sha1(archive) != SHA1:
        partial = archive.with_suffix(".part")
        download = urllib.request.urlopen(URL, timeout=300)  # noqa: S310 - a fixed https URL
        with download as response, partial.open("wb") as out:
            shutil.copyfileobj(response, out)
        if _sha1(partial) != SHA1:
            partial.unlink()
            raise RuntimeError(f"{URL} does not have the SHA-1 {SHA1}")
        partial.rename(archive)
    shutil.rmtree(HOME, ignore_errors=True)
    with zipfile.ZipFile(archive) as zipped:
        zipped.extractall(CACHE)
    for script in (HOME / "bin").glob("*.sh"):
        script.chmod(0o755)
    env = {**os.environ, "JAVA_HOME": str(java_home())}
    subprocess.run([str(HOME / "bin" / "kc.sh"), "build", "--db=dev-file"], env=env,
                   check=True, stdout=subprocess.DEVNULL)  # fmt: skip
    BUILT.touch()
    return HOME


def _sha1(path: Path) -> str:
    digest = hashlib.sha1()  # noqa: S324 - Maven Central publishes SHA-1
    with path.open("rb") as data:
        for chunk in iter(lambda: data.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


@dataclass
class Keycloak:
    """One Keycloak on 127.0.0.1, its data in `root`; stop() ends it."""

    root: Path
    port: int = 0
    admin_password: str = ""
    process: Process | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def issuer(self, realm: str) -> str:
        return f"{self.url}/realms/{realm}"

    def start(self) -> Keycloak:
        home = fetch()
        self.port = self.port or free_port()
        self.admin_password = secrets.token_urlsafe(16)
        env = {
            **os.environ,
            "JAVA_HOME": str(java_home()),
            "KC_BOOTSTRAP_ADMIN_USERNAME": "admin",
            "KC_BOOTSTRAP_ADMIN_PASSWORD": self.admin_password,
        }
        h2 = self.root / "h2" / "keycloakdb"
        database = f"jdbc:h2:file:{h2};NON_KEYWORDS=VALUE;DB_CLOSE_ON_EXIT=FALSE"
        # One server, no cluster: production mode's default cache would bind JGroups to an
        # address of this host's, which may be a real node's bridge that goes away beside it.
        argv = [str(home / "bin" / "kc.sh"), "start", "--optimized", "--http-enabled=true",
                "--http-host=127.0.0.1", f"--http-port={self.port}", "--hostname-strict=false",
                f"--db-url={database}", "--cache=local"]  # fmt: skip
        self.process = Process("keycloak", argv, self.root / "keycloak.log", env=env)
        discovery = f"{self.issuer('master')}/.well-known/openid-configuration"
        wait_for("Keycloak", lambda: _ok(discovery), START_TIMEOUT, [self.process], 0.25)
        return self

    def stop(self) -> None:
        if self.process is not None:
            self.process.stop()

    # -- its admin REST API -----------------------------------------------------------------------

    def admin(self, method: str, path: str, body: Any = None) -> Any:
        token = self._admin_token()
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(  # noqa: S310 - loopback http
            f"{self.url}/admin/realms{path}", data, method=method,
            headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        )  # fmt: skip
        with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310
            raw = response.read()
        return json.loads(raw) if raw.strip() else None

    def _admin_token(self) -> str:
        form = urllib.parse.urlencode({
            "grant_type": "password", "client_id": "admin-cli",
            "username": "admin", "password": self.admin_password,
        })  # fmt: skip
        url = f"{self.issuer('master')}/protocol/openid-connect/token"
        with urllib.request.urlopen(url, form.encode(), timeout=30) as response:  # noqa: S310
            return str(json.loads(response.read())["access_token"])

    def configure(
        self, realm: str, client_id: str, client_secret: str, redirect_uri: str,
        users: dict[str, str], groups: dict[str, list[str]],
    ) -> None:  # fmt: skip
        """A realm with a confidential client (code flow, PKCE S256 required, a `groups`
        claim in ID tokens), `users` (name -> password) and `groups` (name -> members)."""
        self.admin("POST", "", {
            "realm": realm, "enabled": True,
            "groups": [{"name": g} for g in groups],
            "users": [{"username": u, "enabled": True, "email": f"{u}@example.com",
                       "emailVerified": True, "firstName": u.title(), "lastName": "Example",
                       "credentials": [{"type": "password", "value": p, "temporary": False}],
                       "groups": [f"/{g}" for g, members in groups.items() if u in members]}
                      for u, p in users.items()],
            "clients": [{
                "clientId": client_id, "enabled": True, "publicClient": False,
                "secret": client_secret, "redirectUris": [redirect_uri],
                "standardFlowEnabled": True, "directAccessGrantsEnabled": False,
                "attributes": {"pkce.code.challenge.method": "S256"},
                "protocolMappers": [{
                    "name": "groups", "protocol": "openid-connect",
                    "protocolMapper": "oidc-group-membership-mapper",
                    "config": {"claim.name": "groups", "full.path": "false",
                               "id.token.claim": "true", "access.token.claim": "true",
                               "userinfo.token.claim": "true"},
                }],
            }],
        })  # fmt: skip

    def leave_group(self, realm: str, username: str, group: str) -> None:
        user = self.admin("GET", f"/{realm}/users?exact=true&username={username}")[0]
        found = self.admin("GET", f"/{realm}/groups?search={group}")
        group_id = next(g["id"] for g in found if g["name"] == group)
        self.admin("DELETE", f"/{realm}/users/{user['id']}/groups/{group_id}")


def _ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:  # noqa: S310 - loopback
            return bool(response.status == 200)
    except OSError:
        return False


if __name__ == "__main__":
    if sys.argv[1:] != ["fetch"]:
        sys.exit("usage: python -m corral.devenv.keycloak fetch")
    print(fetch())
