"""The web console with 1,000 clusters (CRs created directly) in Debian's Chromium: the
list's render time and the tab's JavaScript heap, how long scrolling to the end takes, and the
events per second `/v3/subscribe` carries while all 1,000 change at once."""

from __future__ import annotations

import asyncio
import json
import ssl
import time

import aiohttp
from lightkube import AsyncClient, KubeConfig
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.types import PatchType
from playwright.sync_api import expect, sync_playwright

from corral.core.kube import kinds
from corral.devenv.environment import Environment
from corral.devenv.waiting import wait_for
from tests.bench.common import get_json, stack

CLUSTERS = 1000
CONCURRENCY = 32
IDLE_SECONDS = 5.0


def client(env: Environment) -> AsyncClient:
    return AsyncClient(KubeConfig.from_file(env.management_kubeconfig), field_manager="bench")


async def each_cluster(env: Environment, action: str) -> tuple[int, float]:
    """Create every bench cluster, or change each one's description: how many writes the
    management cluster took (a loaded one times some out), and the seconds taken."""
    began, limit = time.monotonic(), asyncio.Semaphore(CONCURRENCY)
    kube = client(env)

    async def one(index: int) -> None:
        name = f"c-bench{index:04d}"
        async with limit:
            if action == "create":
                spec = {"displayName": f"bench {index:04d}", "driver": "imported"}
                await kube.create(kinds.Cluster(metadata=ObjectMeta(name=name), spec=spec))
            else:
                await kube.patch(kinds.Cluster, name, {"spec": {"description": action}},
                                 patch_type=PatchType.MERGE)  # fmt: skip

    done = await asyncio.gather(*(one(i) for i in range(CLUSTERS)), return_exceptions=True)
    await kube.close()
    return sum(1 for d in done if not isinstance(d, BaseException)), time.monotonic() - began


async def events_per_second(env: Environment) -> dict[str, float]:
    """Change every cluster while an administrator's socket listens: the writes made, the
    change events received for them, and both rates. The writes go as fast as the management
    cluster takes them (32 at a time); the events arrive as its watch delivers them."""
    context = ssl.create_default_context(cafile=str(env.ca_path))
    url = f"{env.api_url}/v3/subscribe?resourceTypes=cluster&eventNames=resource.change"
    headers = {"Authorization": f"Bearer {env.admin_token}"}
    async with (
        aiohttp.ClientSession() as session,
        session.ws_connect(url, headers=headers, ssl=context, max_msg_size=0) as socket,
    ):
        seen: set[str] = set()
        first = last = 0.0
        sender = asyncio.create_task(each_cluster(env, "changed"))

        async def receive() -> None:
            nonlocal first, last
            async for message in socket:
                event = json.loads(message.data)
                if event["data"].get("description") == "changed":
                    last = time.monotonic()
                    first = first or last
                    seen.add(event["data"]["id"])

        receiver = asyncio.create_task(receive())
        written, writing = await sender
        # The events of the last writes are on their way: wait until they are in (or no more
        # come for a while).
        while len(seen) < written:
            count = len(seen)
            await asyncio.sleep(IDLE_SECONDS)
            if len(seen) == count:
                break
        receiver.cancel()
    return {
        "writes": written,
        "writes_per_s": round(written / writing),
        "events": len(seen),
        "events_per_s": round(len(seen) / max(last - first, 1e-3)),
    }


def browser_figures(env: Environment, clusters: int) -> dict[str, float]:
    with sync_playwright() as playwright:
        flags = ["--no-sandbox", "--enable-precise-memory-info"]
        browser = playwright.chromium.launch(executable_path="/usr/bin/chromium", args=flags)
        page = browser.new_context(ignore_https_errors=True,
                                   viewport={"width": 1280, "height": 800}).new_page()  # fmt: skip
        page.goto(env.api_url)
        page.get_by_label("Username").fill("admin")
        page.get_by_label("Password").fill(env.admin_password)
        began = time.monotonic()
        page.get_by_role("button", name="Sign in").click()
        expect(page.get_by_text(f"{clusters} of {clusters} clusters")).to_be_visible(timeout=60_000)
        rendered = time.monotonic() - began
        in_page = page.locator("[data-cluster]").count()
        scroll = page.evaluate("""async () => {
            const body = document.querySelector('.table-body');
            const began = performance.now();
            let frames = 0, worst = 0, last = began;
            while (body.scrollTop + body.clientHeight < body.scrollHeight - 1) {
              body.scrollTop += body.clientHeight / 2;
              await new Promise(requestAnimationFrame);
              const now = performance.now();
              worst = Math.max(worst, now - last); last = now; frames += 1;
            }
            return {ms: performance.now() - began, frames, worstFrameMs: worst};
        }""")
        expect(page.locator('[data-cluster="local"]')).to_be_visible()
        heap = page.evaluate("performance.memory.usedJSHeapSize")
        browser.close()
    return {
        "sign_in_to_all_rows_s": round(rendered, 2),
        "rows_in_page": in_page,
        "scroll_to_end_ms": round(scroll["ms"]),
        "scroll_frames": scroll["frames"],
        "worst_frame_ms": round(scroll["worstFrameMs"], 1),
        "js_heap_mib": round(heap / 2**20, 1),
    }


def main() -> None:
    with stack(downstream_clusters=0) as env:
        created, seconds = asyncio.run(each_cluster(env, "create"))
        print(f"created {created} clusters in {seconds:.0f} s")
        listed = f"{env.api_url}/v3/clusters?limit=1"

        def cached() -> bool:
            return bool(get_json(env, listed)["pagination"]["total"] == created + 1)

        wait_for("the API server's caches", cached, 120)
        print("console:", json.dumps(browser_figures(env, created + 1)))
        print("subscription:", json.dumps(asyncio.run(events_per_second(env))))
