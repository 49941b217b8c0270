"""Logs, exec (with stdin, with a terminal) and port-forward of a real pod, through corral.

The management cluster (`local` in corral) has a real node; a project and a namespace are
made through `/v3`, a busybox pod runs there, and kubectl reaches it only through corral's
`/k8s/clusters/local` proxy with a kubeconfig from `generateKubeconfig`. A simulated
downstream cluster shows what kwok's pods answer.

The module has its own environment (`real_stack`, `api` on it, `running_pod`): tests of the
`/v3` pod routes belong here too. Only one environment with real nodes can run per host.
"""

from __future__ import annotations

import base64
import json
import queue
import re
import secrets
import shlex
import shutil
import ssl
import subprocess
import threading
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from corral.devenv.environment import Environment
from corral.devenv.waiting import wait_for

from .api import Api
from .api import handshake as websocket_handshake
from .conftest import Person, new_person, set_setting, stack_options

pytestmark = pytest.mark.timeout(600)

LOCAL = "local"
KUBECTL_TIMEOUT = 60.0
READY_TIMEOUT = 90.0
CONTAINER = "app"
PORT = 8080
PAGE = "served-through-corral"
# Known lines on stdout and stderr, a page on PORT, then a numbered tick every second.
SCRIPT = f"""trap 'exit 0' TERM
echo first-line; echo second-line; echo to-stderr >&2
mkdir -p /www; echo {PAGE} > /www/index.html
httpd -f -p {PORT} -h /www &
i=0; while true; do echo tick-$i; i=$((i+1)); sleep 1; done &
wait
"""

# The container of the pods here: what SCRIPT writes, from the image the node has.
TALKER = {
    "name": CONTAINER,
    "image": "localhost/busybox:1",
    "imagePullPolicy": "Never",
    "command": ["/bin/sh", "-c", SCRIPT],
    "ports": [{"containerPort": PORT}],
    "resources": {"limits": {"cpu": "200m", "memory": "64Mi"}},
}


@dataclass
class RunningPod:
    """A Ready busybox pod in a namespace of a project of `local`, and an admin kubeconfig of
    `local` that goes through corral."""

    project: str
    namespace: str
    name: str
    container: str
    kubeconfig: Path


@pytest.fixture(scope="module")
def real_stack(tmp_path_factory: pytest.TempPathFactory, devkube: Path) -> Iterator[Environment]:
    root = tmp_path_factory.mktemp("streams")
    options = stack_options(root, devkube, real_nodes=1, downstream_clusters=1, nodes_per_cluster=1)
    with Environment(options) as env:
        set_setting(env, "api-rate-limit-per-minute", "100000")
        yield env


@pytest.fixture(scope="module")
def api(real_stack: Environment) -> Api:
    """The admin's API token on this module's environment (overrides the session's)."""
    context = ssl.create_default_context(cafile=str(real_stack.ca_path))
    return Api(real_stack.api_url, context, real_stack.admin_token)


@pytest.fixture(scope="module")
def management_core(real_stack: Environment) -> k8s.CoreV1Api:
    config = str(real_stack.management_kubeconfig)
    return k8s.CoreV1Api(k8s_config.new_client_from_config(config_file=config))


@pytest.fixture(scope="module")
def running_pod(real_stack: Environment, api: Api, management_core: k8s.CoreV1Api) -> RunningPod:
    project = create_project(api, LOCAL)
    namespace = f"streams-{secrets.token_hex(3)}"
    created = api.post(
        f"/v3/clusters/{LOCAL}/namespaces",
        {"type": "namespace", "name": namespace, "projectId": project},
    )
    assert created.status == 201, created.body
    management_core.create_namespaced_pod(namespace, busybox_pod("streams"))
    wait_for(
        "the pod Ready",
        lambda: ready(management_core.read_namespaced_pod("streams", namespace)),
        READY_TIMEOUT,
    )
    # Ready can come before the script's first tick: the logs tests read its first lines.
    wait_for(
        "the first tick",
        lambda: "tick-0" in management_core.read_namespaced_pod_log("streams", namespace),
        10,
    )
    kubeconfig = write_kubeconfig(api, LOCAL, real_stack.root / "kubectl" / "admin.kubeconfig")
    return RunningPod(project, namespace, "streams", CONTAINER, kubeconfig)


# -- helpers ----------------------------------------------------------------------------------


def create_project(api: Api, cluster: str) -> str:
    created = api.post(
        "/v3/projects",
        {"type": "project", "name": f"streams-{secrets.token_hex(3)}", "clusterId": cluster},
    )
    assert created.status == 201, created.body
    project: str = created.body["id"]
    return project


def busybox_pod(name: str) -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "terminationGracePeriodSeconds": 1,
            "containers": [
                {
                    **TALKER,
                    "readinessProbe": {"httpGet": {"path": "/", "port": PORT}, "periodSeconds": 1},
                }
            ],
        },
    }


def ready(pod: k8s.V1Pod) -> bool:
    return any(c.type == "Ready" and c.status == "True" for c in pod.status.conditions or [])


def write_kubeconfig(api: Api, cluster: str, path: Path) -> Path:
    """`generateKubeconfig` of the caller, saved as kubectl reads it."""
    generated = api.post(f"/v3/clusters/{cluster}?action=generateKubeconfig")
    assert generated.status == 200, generated.body
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(base64.b64decode(generated.body["config"]))
    path.chmod(0o600)
    return path


def kubectl_command(devkube: Path, kubeconfig: Path, *args: str) -> list[str]:
    # The discovery cache stays beside the kubeconfig, not in the user's ~/.kube.
    cache = kubeconfig.parent / "cache"
    return [str(devkube), "kubectl", f"--kubeconfig={kubeconfig}", f"--cache-dir={cache}", *args]


def kubectl(
    devkube: Path, kubeconfig: Path, *args: str, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        kubectl_command(devkube, kubeconfig, *args),
        input=stdin,
        capture_output=True,
        text=True,
        timeout=KUBECTL_TIMEOUT,
        check=False,
    )


class Lines:
    """A running kubectl's output, line by line as it comes."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.process = process
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line.rstrip("\n"))

    def next_matching(self, pattern: str, timeout: float) -> re.Match[str]:
        def arrived() -> re.Match[str] | None:
            try:
                line = self.lines.get(timeout=0.2)
            except queue.Empty:
                return None
            self.seen.append(line)
            return re.search(pattern, line)

        return wait_for(f"a line matching {pattern!r}", arrived, timeout)


@pytest.fixture
def background() -> Iterator[list[subprocess.Popen[str]]]:
    """Long-running kubectl processes (logs -f, port-forward), stopped after the test."""
    processes: list[subprocess.Popen[str]] = []
    yield processes
    for process in processes:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def start(
    background: list[subprocess.Popen[str]], devkube: Path, kubeconfig: Path, *args: str
) -> Lines:
    process = subprocess.Popen(
        kubectl_command(devkube, kubeconfig, *args),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    background.append(process)
    return Lines(process)


# -- logs -------------------------------------------------------------------------------------


def test_logs_show_what_the_container_wrote(running_pod: RunningPod, devkube: Path) -> None:
    pod = running_pod
    done = kubectl(devkube, pod.kubeconfig, "logs", "-n", pod.namespace, pod.name)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    # stdout in its order; stderr is another pipe, so its line may come anywhere among them.
    assert "to-stderr" in lines
    assert [line for line in lines if line != "to-stderr"][:3] == [
        "first-line",
        "second-line",
        "tick-0",
    ]
    tail = kubectl(
        devkube,
        pod.kubeconfig,
        "logs",
        "-n",
        pod.namespace,
        pod.name,
        f"--container={pod.container}",
        "--tail=1",
        "--timestamps",
    )
    assert tail.returncode == 0, tail.stderr
    (line,) = tail.stdout.splitlines()
    # The last line written, stamped by the runtime (stderr's may be the last).
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT[\d:.]+Z (tick-\d+|to-stderr)", line), line


def test_logs_follow_streams_new_lines(
    running_pod: RunningPod, devkube: Path, background: list[subprocess.Popen[str]]
) -> None:
    pod = running_pod
    follow = start(
        background, devkube, pod.kubeconfig, "logs", "-f", "--tail=1", "-n", pod.namespace, pod.name
    )
    first = int(follow.next_matching(r"^tick-(\d+)$", 30).group(1))
    later = int(follow.next_matching(r"^tick-(\d+)$", 10).group(1))
    again = int(follow.next_matching(r"^tick-(\d+)$", 10).group(1))
    # Written by the container after the stream opened, and in order.
    assert first < later < again
    assert follow.process.poll() is None, follow.seen


# -- exec -------------------------------------------------------------------------------------


def test_exec_returns_stdout_stderr_and_the_exit_code(
    running_pod: RunningPod, devkube: Path
) -> None:
    pod = running_pod
    done = kubectl(
        devkube,
        pod.kubeconfig,
        "exec",
        "-n",
        pod.namespace,
        pod.name,
        "--",
        "sh",
        "-c",
        "echo to-out; echo to-err >&2; exit 3",
    )
    assert done.returncode == 3, done.stderr
    assert done.stdout == "to-out\n"
    assert done.stderr.startswith("to-err\n")
    assert "command terminated with exit code 3" in done.stderr
    ok = kubectl(
        devkube,
        pod.kubeconfig,
        "exec",
        "-n",
        pod.namespace,
        pod.name,
        f"--container={pod.container}",
        "--",
        "cat",
        "/www/index.html",
    )
    assert (ok.returncode, ok.stdout) == (0, f"{PAGE}\n"), ok.stderr


def test_exec_with_stdin(running_pod: RunningPod, devkube: Path) -> None:
    pod = running_pod
    text = "".join(f"line {i} through corral\n" for i in range(2000))  # ~50 KiB: many frames
    done = kubectl(
        devkube,
        pod.kubeconfig,
        "exec",
        "-i",
        "-n",
        pod.namespace,
        pod.name,
        "--",
        "sh",
        "-c",
        "tr a-z A-Z; echo done >&2",
        stdin=text,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == text.upper()
    assert done.stderr == "done\n"


def test_exec_with_a_terminal(running_pod: RunningPod, devkube: Path) -> None:
    """`exec -it`: kubectl wants a terminal of its own, which `script` gives it."""
    pod = running_pod
    command = kubectl_command(
        devkube, pod.kubeconfig, "exec", "-it", "-n", pod.namespace, pod.name, "--", "sh"
    )
    script = shutil.which("script")
    assert script, "the test needs util-linux's script"
    done = subprocess.run(
        [script, "-qec", shlex.join(command), "/dev/null"],
        input="echo tty-$((6*7)); tty; exit 4\n",
        capture_output=True,
        text=True,
        timeout=KUBECTL_TIMEOUT,
        check=False,
    )
    output = done.stdout.replace("\r", "")
    assert "\ntty-42\n" in output, output
    assert re.search(r"^/dev/pts/\d+$", output, re.MULTILINE), output
    assert done.returncode == 4, output


def test_exec_of_a_missing_pod_or_container_says_so(running_pod: RunningPod, devkube: Path) -> None:
    pod = running_pod
    missing = kubectl(devkube, pod.kubeconfig, "exec", "-n", pod.namespace, "nope", "--", "true")
    assert missing.returncode == 1
    assert 'pods "nope" not found' in missing.stderr
    container = kubectl(
        devkube,
        pod.kubeconfig,
        "exec",
        "-n",
        pod.namespace,
        pod.name,
        "--container=nope",
        "--",
        "true",
    )
    assert container.returncode == 1
    assert "container nope is not valid for pod streams" in container.stderr


# -- port-forward -----------------------------------------------------------------------------


def test_port_forward_reaches_the_pods_port(
    running_pod: RunningPod, devkube: Path, background: list[subprocess.Popen[str]]
) -> None:
    pod = running_pod
    forward = start(
        background,
        devkube,
        pod.kubeconfig,
        "port-forward",
        "--address=127.0.0.1",
        "-n",
        pod.namespace,
        f"pod/{pod.name}",
        f":{PORT}",
    )
    found = forward.next_matching(rf"^Forwarding from 127\.0\.0\.1:(\d+) -> {PORT}$", 30)
    local = int(found.group(1))
    for _ in range(3):  # each request is a new stream over the one WebSocket
        with urllib.request.urlopen(f"http://127.0.0.1:{local}/", timeout=10) as response:
            assert response.read().decode().strip() == PAGE
    assert forward.process.poll() is None, forward.seen


# -- who may ----------------------------------------------------------------------------------


def test_a_user_without_a_role_in_the_project_is_refused(
    real_stack: Environment, api: Api, running_pod: RunningPod, devkube: Path
) -> None:
    """A member of another project of `local` has a kubeconfig for it, and nothing in this
    project's namespace; a read-only member of this project reads logs but runs nothing."""
    pod = running_pod
    other = create_project(api, LOCAL)
    outsider = grant(api, other, "project-member")
    reader = grant(api, pod.project, "read-only")
    member = grant(api, pod.project, "project-member")
    kubeconfigs = real_stack.root / "kubectl"
    outsider_config = write_kubeconfig(outsider.api, LOCAL, kubeconfigs / "outsider.kubeconfig")
    reader_config = write_kubeconfig(reader.api, LOCAL, kubeconfigs / "reader.kubeconfig")
    member_config = write_kubeconfig(member.api, LOCAL, kubeconfigs / "member.kubeconfig")

    # The member's RoleBinding is made by the operator: once it works, the others' would have.
    def member_runs() -> bool:
        done = kubectl(devkube, member_config, "exec", "-n", pod.namespace, pod.name, "--", "true")
        return done.returncode == 0

    wait_for("the member's role in the namespace", member_runs, 60)
    wait_for(
        "the reader's role in the namespace",
        lambda: kubectl(devkube, reader_config, "get", "pods", "-n", pod.namespace).returncode == 0,
        60,
    )

    for args in (
        ("logs", pod.name),
        ("exec", pod.name, "--", "true"),
        ("port-forward", f"pod/{pod.name}", f":{PORT}"),
    ):
        refused = kubectl(devkube, outsider_config, *args, "-n", pod.namespace)
        assert refused.returncode == 1, (args, refused.stdout)
        assert "forbidden" in refused.stderr, refused.stderr
        assert f'User "{outsider.id}" cannot' in refused.stderr, refused.stderr

    logs = kubectl(devkube, reader_config, "logs", "-n", pod.namespace, pod.name)
    assert logs.returncode == 0 and "first-line" in logs.stdout, logs.stderr
    refused = kubectl(devkube, reader_config, "exec", "-n", pod.namespace, pod.name, "--", "true")
    assert refused.returncode == 1
    assert f'User "{reader.id}" cannot create resource "pods/exec"' in refused.stderr


def test_a_session_cookie_opens_streams_only_from_corrals_origin(
    real_stack: Environment, api: Api, running_pod: RunningPod
) -> None:
    """A browser sends the session cookie with a WebSocket handshake from any page, and such a
    handshake carries no CSRF header: only corral's own origin may use it."""
    pod = running_pod
    login = api.login("admin", real_stack.admin_password, responseType="cookie")
    cookie = f"R_SESS={login.cookies['R_SESS'].value}"
    path = (
        f"/k8s/clusters/{LOCAL}/api/v1/namespaces/{pod.namespace}/pods/{pod.name}/exec"
        "?command=true&stdout=true"
    )
    refused = handshake(api, path, Cookie=cookie, Origin="https://evil.example")
    assert refused[0] == 403 and b"PermissionDenied" in refused[1], refused
    assert handshake(api, path, Cookie=cookie, Origin=api.base)[0] == 101
    # A token is no ambient credential: any origin may present one.
    bearer = f"Bearer {api.token}"
    assert handshake(api, path, Authorization=bearer, Origin="https://evil.example")[0] == 101


def test_a_refused_handshake_answers_the_clusters_status(api: Api, running_pod: RunningPod) -> None:
    pod = running_pod
    bearer = f"Bearer {api.token}"
    base = f"/k8s/clusters/{LOCAL}/api/v1/namespaces/{pod.namespace}/pods"
    status, body = handshake(
        api, f"{base}/nope/exec?command=true&stdout=true", Authorization=bearer
    )
    answer = json.loads(body)
    assert (status, answer["kind"], answer["reason"]) == (404, "Status", "NotFound")
    assert answer["message"] == 'pods "nope" not found'
    status, body = handshake(
        api, f"{base}/{pod.name}/exec?command=true&stdout=true&container=nope", Authorization=bearer
    )
    assert status == 400
    assert "container nope is not valid for pod streams" in json.loads(body)["message"]


def handshake(api: Api, path: str, **headers: str) -> tuple[int, bytes]:
    """A handshake offering the remote-command protocol, as kubectl does."""
    return websocket_handshake(api, path, **{"Sec-WebSocket-Protocol": "v5.channel.k8s.io"},
                               **headers)  # fmt: skip


def grant(api: Api, project: str, role: str) -> Person:
    person = new_person(api)
    granted = api.post(
        "/v3/projectroletemplatebindings",
        {"projectId": project, "userId": person.id, "roleTemplateId": role},
    )
    assert granted.status == 201, granted.body
    wait_for(
        f"{person.username} sees {LOCAL}",
        lambda: person.api.get(f"/v3/clusters/{LOCAL}").status == 200,
        30,
    )
    return person


# -- simulated pods ---------------------------------------------------------------------------


def test_kwok_pods_log_that_they_are_simulated_and_refuse_exec(
    real_stack: Environment, api: Api, devkube: Path
) -> None:
    (cluster,) = real_stack.cluster_ids
    config = str(real_stack.downstream_kubeconfigs()[0])
    core = k8s.CoreV1Api(k8s_config.new_client_from_config(config_file=config))
    name = f"sim-{secrets.token_hex(3)}"
    core.create_namespaced_pod("default", busybox_pod(name))
    wait_for(
        f"kwok's pod {name} Running",
        lambda: core.read_namespaced_pod(name, "default").status.phase == "Running",
        READY_TIMEOUT,
    )
    kubeconfig = write_kubeconfig(api, cluster, real_stack.root / "kubectl" / "demo.kubeconfig")
    logs = kubectl(devkube, kubeconfig, "logs", "-n", "default", name)
    assert logs.returncode == 0, logs.stderr
    assert "This pod is simulated by kwok" in logs.stdout
    refused = kubectl(devkube, kubeconfig, "exec", "-n", "default", name, "--", "id")
    assert refused.returncode == 1
    assert f'no exec found for container "{CONTAINER}"' in refused.stderr, refused.stderr


# -- the /v3 pod routes on a real pod -----------------------------------------------------------


@pytest.fixture(scope="module")
def real_workload(real_stack: Environment, api: Api, running_pod: RunningPod) -> dict[str, str]:
    """A Deployment made through /v3 in the running pod's namespace, its one pod Ready on the
    real node: what a user of corral would run."""
    body = {
        "name": "talker",
        "namespaceId": running_pod.namespace,
        "containers": [TALKER],
    }
    base = f"/v3/projects/{running_pod.project}/workloads"
    created = api.post(base, body)
    assert created.status == 201, created.body
    wid = created.body["id"]
    wait_for(
        "the workload active",
        lambda: api.get(f"{base}/{wid}").body["state"] == "active",
        READY_TIMEOUT,
    )
    pods = api.get(f"/v3/projects/{running_pod.project}/pods?workloadId={wid}").body["data"]
    return {"workload": wid, "pod": pods[0]["id"], "project": running_pod.project}


def test_v3_logs_return_what_the_container_wrote(api: Api, real_workload: dict[str, str]) -> None:
    logs = f"/v3/projects/{real_workload['project']}/pods/{real_workload['pod']}/logs"
    written = wait_for(
        "the first lines", lambda: "tick-1" in api.get(logs).body and api.get(logs).body, 30
    )
    lines = written.splitlines()
    # stdout and stderr reach the log through separate pipes: only each one's order is kept.
    assert "to-stderr" in lines
    assert [line for line in lines if line != "to-stderr"][:2] == ["first-line", "second-line"]
    assert api.get(f"{logs}?tailLines=1").body.startswith("tick-")

    # Following: the response stays open and new ticks arrive while it does.
    request = urllib.request.Request(
        api.base + logs + "?follow=true&tailLines=0",
        headers={"Authorization": f"Bearer {api.token}"},
    )
    with urllib.request.urlopen(request, timeout=30, context=api.context) as stream:
        first, second = stream.readline().decode(), stream.readline().decode()
    assert first.startswith("tick-") and second.startswith("tick-")
    assert int(second.strip()[5:]) == int(first.strip()[5:]) + 1


def test_v3_execute_returns_output_and_exit_status_and_is_audited(
    real_stack: Environment, api: Api, real_workload: dict[str, str]
) -> None:
    execute = f"/v3/projects/{real_workload['project']}/pods/{real_workload['pod']}?action=execute"
    ran = api.post(execute, {"command": ["sh", "-c", "cat /www/index.html; echo oops >&2; exit 3"]})
    assert ran.status == 200, ran.body
    assert ran.body == {
        "type": "podExecOutput",
        "stdout": f"{PAGE}\n",
        "stderr": "oops\n",
        "exitCode": 3,
        "truncated": False,
    }
    big = api.post(execute, {"command": ["sh", "-c", "yes 0123456789abcdef | head -c 2000000"]})
    assert big.status == 200, big.body
    assert big.body["truncated"] is True and len(big.body["stdout"]) == 1 << 20
    missing = api.post(execute, {"command": ["/no/such/program"]})
    assert missing.status == 422 and missing.body["code"] == "ExecFailed", missing.body

    # The API server's log names who ran what, where; never what it printed.
    (server,) = [p for p in real_stack.corral if "api" in p.name]
    log = server.log_path.read_text()
    assert "cat /www/index.html" in log and real_workload["pod"].split(":")[1] in log
    assert PAGE not in log


def test_v3_read_only_users_read_logs_but_never_execute(
    api: Api, real_workload: dict[str, str]
) -> None:
    reader = grant(api, real_workload["project"], "read-only")
    pod = f"/v3/projects/{real_workload['project']}/pods/{real_workload['pod']}"

    # The reader's RoleBinding downstream is the operator's to make: until it is there, the
    # cluster refuses them, and says so.
    def reads() -> bool:
        answer = reader.api.get(f"{pod}/logs")
        assert answer.status in (200, 403), answer.body
        return answer.status == 200 and "first-line" in answer.body

    wait_for("the reader's role in the namespace", reads, 60)
    refused = reader.api.post(f"{pod}?action=execute", {"command": ["true"]})
    assert refused.status == 403, refused.body
