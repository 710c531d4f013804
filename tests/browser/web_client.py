"""The reference web client (web/) in a real browser: headless Chromium driven by Playwright,
against a running local stack (tests/tests/suite/web_client.rs starts one and runs this).

Each scenario uses items of its own, so they share the stack without meeting. A scenario
that fails leaves a screenshot of each of its pages in --failures. Exit status 1 if any
scenario failed.

    python tests/browser/web_client.py --web http://127.0.0.1:8080 --api http://127.0.0.1:3000 \
        --prefix t --failures target/browser [--page-shot docs/web-client.png]
"""

import argparse
import json
import os
import re
import sys
import traceback
import urllib.request
from pathlib import Path

from playwright.sync_api import Browser, Page, expect, sync_playwright

# As root, in a closed network: no sandbox, no GPU, and none of Chromium's own calls home.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
# At once: what the page shows before any answer. Converged: the pipeline, the pulse and
# the live push on a loaded emulator.
AT_ONCE_MS = 500
CONVERGED_MS = 30_000


class Run:
    def __init__(self, browser: Browser, web: str, api: str, prefix: str):
        self.browser = browser
        self.web = web
        self.api = api
        self.prefix = prefix
        self.pages: list[Page] = []

    def item(self, name: str) -> str:
        return f"{name}:{self.prefix}"

    def open(self, user: str, *items: str, before_load=None) -> Page:
        """A new browser context (its own storage: another person) signed in as `user`."""
        page = self.browser.new_context(viewport={"width": 1100, "height": 760}).new_page()
        self.pages.append(page)
        page.on("pageerror", lambda error: print(f"  page error ({user}): {error}"))
        if before_load:
            before_load(page)
        page.goto(f"{self.web}/?items={','.join(items)}")
        page.get_by_label("User").fill(user)
        page.get_by_role("button", name="Sign in").click()
        for item in items:
            expect(self.button(page, item, "like")).to_be_enabled()
        return page

    @staticmethod
    def row(page: Page, item: str):
        return page.locator(f'li[data-item-id="{item}"]')

    def button(self, page: Page, item: str, which: str):
        return self.row(page, item).locator(f".{which}")

    def count(self, page: Page, item: str, which: str = "like"):
        return self.row(page, item).locator(f".{which}-count")

    def token(self, user: str) -> str:
        request = urllib.request.Request(
            f"{self.web}/local/token",
            data=json.dumps({"user": user}).encode(),
            headers={"content-type": "application/json"},
        )
        with urllib.request.urlopen(request) as answer:
            return json.load(answer)["token"]

    def like_elsewhere(self, user: str, item: str):
        """A like by another client, straight to the API (no page involved)."""
        request = urllib.request.Request(
            f"{self.api}/v1/items/{item}/like",
            method="PUT",
            headers={"authorization": f"Bearer {self.token(user)}"},
        )
        with urllib.request.urlopen(request) as answer:
            assert answer.status == 200, answer.status

    def converged(self, page: Page, item: str, likes: str):
        """The count is `likes`, nothing of mine is pending, and it says how fresh it is."""
        row = self.row(page, item)
        expect(row).to_have_attribute("data-counting", "false", timeout=CONVERGED_MS)
        expect(self.count(page, item)).to_have_text(likes, timeout=CONVERGED_MS)
        expect(row.locator(".freshness")).to_have_text(re.compile(r"^as of \d"))
        expect(row).to_have_attribute("data-as-of", re.compile(r"^\d{4}-"))


def a_like_shows_at_once_and_converges_with_its_as_of(run: Run):
    item = run.item("liked")
    page = run.open("ana", item)
    expect(run.count(page, item)).to_have_text("0")
    run.button(page, item, "like").click()
    expect(run.button(page, item, "like")).to_have_attribute("aria-pressed", "true", timeout=AT_ONCE_MS)
    expect(run.count(page, item)).to_have_text("1", timeout=AT_ONCE_MS)
    run.converged(page, item, "1")
    expect(page.locator("#liked")).to_contain_text(item)
    # The keyboard works the buttons too: Enter on the focused dislike button.
    run.button(page, item, "dislike").focus()
    page.keyboard.press("Enter")
    expect(run.button(page, item, "dislike")).to_have_attribute("aria-pressed", "true", timeout=AT_ONCE_MS)
    expect(run.button(page, item, "like")).to_have_attribute("aria-pressed", "false")
    run.converged(page, item, "0")
    expect(run.count(page, item, "dislike")).to_have_text("1")


def a_watcher_sees_the_count_move_live(run: Run):
    item = run.item("watched")
    watcher = run.open("wes", item)
    expect(watcher.locator("#connection")).to_have_attribute("data-live", "true", timeout=CONVERGED_MS)
    expect(run.row(watcher, item)).to_have_attribute("data-source", "live", timeout=CONVERGED_MS)
    watcher.evaluate("window.notReloaded = true")
    liker = run.open("lia", item)
    run.button(liker, item, "like").click()
    expect(run.count(watcher, item)).to_have_text("1", timeout=CONVERGED_MS)
    expect(run.row(watcher, item)).to_have_attribute("data-source", "live")
    assert watcher.evaluate("window.notReloaded === true"), "the watcher's page was reloaded"


def a_reload_keeps_the_state(run: Run):
    item = run.item("kept")
    page = run.open("rea", item)
    run.button(page, item, "like").click()
    run.converged(page, item, "1")
    page.reload()
    expect(page.locator("#user")).to_have_text("rea")
    expect(run.button(page, item, "like")).to_have_attribute("aria-pressed", "true", timeout=CONVERGED_MS)
    expect(run.count(page, item)).to_have_text("1")
    expect(page.locator("#liked")).to_contain_text(item)


def a_refused_write_shows_why_and_rolls_back(run: Run):
    # The stack allows one write a second per user: the second tap in a row is refused.
    item = run.item("limited")
    page = run.open("ray", item)
    like = run.button(page, item, "like")
    like.click()
    like.click()
    expect(page.locator("#message")).to_contain_text("Try again in", timeout=CONVERGED_MS)
    expect(like).to_have_attribute("aria-pressed", "true")
    expect(like).to_be_disabled()
    # Retry-After honoured: the buttons come back, and the first tap's like stands.
    expect(like).to_be_enabled(timeout=CONVERGED_MS)
    run.converged(page, item, "1")


def a_lost_answer_is_retried_with_the_same_key(run: Run):
    item = run.item("retried")
    keys = []

    def lose_first_answer(route):
        keys.append(route.request.headers["idempotency-key"])
        if len(keys) > 1:
            route.continue_()
            return
        route.fetch()  # the write reaches the service...
        run.pages[0].wait_for_timeout(1200)  # (past the stack's one write a second)
        route.abort("connectionreset")  # ...and its answer never reaches the page

    page = run.open("lou", item)
    page.route(re.compile(r".*/reaction$"), lose_first_answer)
    run.button(page, item, "like").click()
    run.converged(page, item, "1")
    expect(run.button(page, item, "like")).to_have_attribute("aria-pressed", "true")
    assert len(keys) == 2 and keys[0] == keys[1], f"the retry sent another key: {keys}"


def a_stale_item_is_polled_until_live_counts_return(run: Run):
    item = run.item("stale")
    sockets = []

    def route(socket):
        socket.connect_to_server()
        sockets.append(socket)

    page = run.open("sal", item, before_load=lambda p: p.route_web_socket(re.compile(".*"), route))
    expect(run.row(page, item)).to_have_attribute("data-source", "live", timeout=CONVERGED_MS)
    # As the broadcaster says it when it falls behind: this item's live counts are late.
    sockets[-1].send(json.dumps({"type": "stale", "item_id": item}))
    expect(run.row(page, item)).to_have_attribute("data-source", "poll")
    expect(page.locator("#connection")).to_have_attribute("data-live", "true")
    run.like_elsewhere("ted", item)
    expect(run.count(page, item)).to_have_text("1", timeout=CONVERGED_MS)
    # The item's next counts message takes it back to live.
    expect(run.row(page, item)).to_have_attribute("data-source", "live", timeout=CONVERGED_MS)


def a_dropped_socket_falls_back_to_polling_and_recovers(run: Run):
    item = run.item("dropped")
    sockets = []
    network = {"down": False}

    def route(socket):
        # While the network is down, a new socket opens and is closed at once.
        if network["down"]:
            socket.close()
            return
        socket.connect_to_server()
        sockets.append(socket)

    page = run.open("dan", item, before_load=lambda p: p.route_web_socket(re.compile(".*"), route))
    expect(run.row(page, item)).to_have_attribute("data-source", "live", timeout=CONVERGED_MS)
    network["down"] = True
    for socket in sockets:
        socket.close()
    expect(page.locator("#connection")).to_have_attribute("data-live", "false", timeout=CONVERGED_MS)
    expect(run.row(page, item)).to_have_attribute("data-source", "poll")
    run.like_elsewhere("eve", item)
    expect(run.count(page, item)).to_have_text("1", timeout=CONVERGED_MS)
    expect(run.row(page, item)).to_have_attribute("data-source", "poll")
    network["down"] = False
    expect(page.locator("#connection")).to_have_attribute("data-live", "true", timeout=CONVERGED_MS)
    expect(run.row(page, item)).to_have_attribute("data-source", "live", timeout=CONVERGED_MS)
    run.like_elsewhere("fay", item)
    expect(run.count(page, item)).to_have_text("2", timeout=CONVERGED_MS)
    expect(run.row(page, item)).to_have_attribute("data-source", "live")


SCENARIOS = [
    a_like_shows_at_once_and_converges_with_its_as_of,
    a_watcher_sees_the_count_move_live,
    a_reload_keeps_the_state,
    a_refused_write_shows_why_and_rolls_back,
    a_lost_answer_is_retried_with_the_same_key,
    a_stale_item_is_polled_until_live_counts_return,
    a_dropped_socket_falls_back_to_polling_and_recovers,
]


def page_shot(run: Run, path: Path):
    """The page as a person sees it: a few items liked, the board, an item's likers."""
    items = [run.item(name) for name in ("song", "film", "book", "game")]
    for user in ("una", "vic", "wyn"):
        run.like_elsewhere(user, items[0])
    run.like_elsewhere("xia", items[2])
    page = run.open("zoe", *items)
    # One write a second per user on the test's stack: the second tap waits for the first.
    run.button(page, items[0], "like").click()
    run.converged(page, items[0], "4")
    page.wait_for_timeout(1000)
    run.button(page, items[1], "dislike").click()
    expect(run.count(page, items[1], "dislike")).to_have_text("1")
    expect(run.row(page, items[1])).to_have_attribute("data-counting", "false", timeout=CONVERGED_MS)
    page.locator("[data-window=all]").click()
    expect(page.locator("#leaderboard")).to_contain_text(items[0], timeout=CONVERGED_MS)
    run.row(page, items[0]).locator(".show-likers").click()
    expect(page.locator("#likers")).to_contain_text("zoe")
    path.parent.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(path), full_page=True)
    print(f"page screenshot: {path}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--web", required=True)
    parser.add_argument("--api", required=True)
    parser.add_argument("--prefix", required=True)
    parser.add_argument("--failures", required=True, type=Path)
    parser.add_argument("--page-shot", type=Path)
    parser.add_argument("--only", help="run only the scenarios whose name holds this")
    args = parser.parse_args()
    chromium = os.environ.get("LIKES_CHROMIUM", "/usr/bin/chromium")
    expect.set_options(timeout=10_000)
    failed = []
    runs: list[Run] = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        steps = [(s.__name__, s) for s in SCENARIOS if (args.only or "") in s.__name__]
        if args.page_shot:
            steps.append(("page_shot", lambda run: page_shot(run, args.page_shot)))
        for name, step in steps:
            run = Run(browser, args.web, args.api, f"{args.prefix}{len(runs)}")
            runs.append(run)
            try:
                step(run)
                print(f"PASS {name}")
            except Exception:  # noqa: BLE001 - every failure is reported, then the next runs
                failed.append(name)
                print(f"FAIL {name}\n{traceback.format_exc()}")
                args.failures.mkdir(parents=True, exist_ok=True)
                for i, page in enumerate(run.pages):
                    shot = args.failures / f"{name}-{i}.png"
                    page.screenshot(path=str(shot), full_page=True)
                    print(f"  screenshot: {shot}")
            finally:
                for page in run.pages:
                    page.context.close()
        browser.close()
    if failed:
        print(f"{len(failed)} of {len(steps)} failed: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
