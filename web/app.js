// The reference web client: a page of items with like and dislike buttons, my likes, the
// leaderboard, an item's likers, and live counts. It is served from its own origin and
// calls both APIs across origins, as a deployed page would.

import { Api, ApiError } from "./api.js";
import { ItemState } from "./item.js";
import { LiveCounts } from "./live.js";

const DEFAULT_ITEMS = ["game:1", "game:2", "game:3", "game:4", "game:5", "game:6"];
const POLL_MS = 2000;
const BOARD_MS = 5000;
const SESSION = "likes.session";

const $ = (selector) => document.querySelector(selector);
const config = await (await fetch("config.json")).json();
// `?items=a,b` shows those items instead of the demo catalogue.
const requested = new URLSearchParams(location.search).get("items");
const itemIds = requested ? requested.split(",").filter(Boolean) : DEFAULT_ITEMS;

const items = new Map(); // id -> ItemState, new at each sign-in
const rows = new Map();
const polling = new Set(itemIds); // items whose counts come from polling, not the socket
let api;
let live;
let timers = [];
let writesBlockedUntil = 0;
let board = "day";
let likersOf = null;

// ---------------------------------------------------------------- session

function signedIn(session) {
  $("#sign-in").hidden = true;
  $("#who").hidden = false;
  $("#user").textContent = session.user;
  $("main").hidden = false;
  api = new Api(config.api, session.token);
  // Nothing of another session's (its reactions, its writes in flight) carries over.
  itemIds.forEach((id) => items.set(id, new ItemState(id)));
  itemIds.forEach((id) => polling.add(id));
  writesBlockedUntil = 0;
  renderItems();
  loadPage();
  live = new LiveCounts(config.live, session.token, {
    onCounts: liveCounts,
    onStale: (id) => {
      polling.add(id);
      render(id);
    },
    onSocket: socketChanged,
  });
  live.watch(itemIds);
  live.start();
  timers = [setInterval(poll, POLL_MS), setInterval(loadBoard, BOARD_MS)];
  loadLiked();
  loadBoard();
}

function signOut(reason) {
  sessionStorage.removeItem(SESSION);
  live?.stop();
  timers.forEach(clearInterval);
  $("main").hidden = true;
  $("#who").hidden = true;
  $("#sign-in").hidden = false;
  $("#connection").textContent = "";
  if (reason) showMessage(reason);
}

$("#sign-in").addEventListener("submit", async (event) => {
  event.preventDefault();
  const user = event.target.elements.user.value;
  const response = await fetch(config.sign_in, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ user }),
  });
  if (!response.ok) return showMessage("Could not sign in: use 1-128 letters, digits or _ . : @ -");
  const session = await response.json();
  sessionStorage.setItem(SESSION, JSON.stringify(session));
  hideMessage();
  signedIn(session);
});

$("#sign-out").addEventListener("click", () => signOut());

// ---------------------------------------------------------------- items and the button

function renderItems() {
  const list = $("#items");
  list.replaceChildren();
  for (const id of itemIds) {
    const row = $("#item-template").content.firstElementChild.cloneNode(true);
    row.dataset.itemId = id;
    row.querySelector(".name").textContent = id;
    row.querySelector(".like").addEventListener("click", () => tap(id, "LIKE"));
    row.querySelector(".dislike").addEventListener("click", () => tap(id, "DISLIKE"));
    row.querySelector(".show-likers").addEventListener("click", () => showLikers(id));
    rows.set(id, row);
    list.append(row);
    render(id);
  }
}

function render(id) {
  const item = items.get(id);
  const row = rows.get(id);
  if (!row) return;
  const shown = item.display();
  row.querySelector(".like").setAttribute("aria-pressed", String(item.shown === "LIKE"));
  row.querySelector(".dislike").setAttribute("aria-pressed", String(item.shown === "DISLIKE"));
  row.querySelector(".like-count").textContent = shown.like ?? "hidden";
  row.querySelector(".dislike-count").textContent = shown.dislike ?? "hidden";
  const freshness = row.querySelector(".freshness");
  if (shown.counting) freshness.textContent = "counting your reaction…";
  else if (shown.asOf) freshness.textContent = `as of ${new Date(shown.asOf).toLocaleTimeString()}`;
  else freshness.textContent = "as of: not known yet";
  row.dataset.asOf = shown.asOf ? new Date(shown.asOf).toISOString() : "";
  row.dataset.counting = String(shown.counting);
  row.dataset.source = polling.has(id) ? "poll" : item.source;
  for (const button of row.querySelectorAll(".like, .dislike")) {
    button.disabled = !item.loaded || Date.now() < writesBlockedUntil;
  }
}

/** A tap shows at once, then goes to the server in order with the item's other taps. */
function tap(id, target) {
  hideMessage();
  const item = items.get(id);
  const state = item.tap(target);
  render(id);
  const key = crypto.randomUUID(); // one per tap, the same on every retry of it
  const generation = item.generation ?? 0;
  item.queue = (item.queue ?? Promise.resolve()).then(() =>
    // A failed tap rolls back every tap after it too: they were made on what it showed.
    generation === (item.generation ?? 0) ? send(item, state, key) : undefined,
  );
}

async function send(item, state, key) {
  try {
    const answer = await api.setReaction(item.id, state, { key, etag: item.confirmed.etag });
    item.accepted(answer);
    loadLiked();
  } catch (error) {
    item.generation = (item.generation ?? 0) + 1;
    item.rollBack();
    await refused(item, error);
    if (error.uncertain || error.status === 412) await reread(item);
  }
  render(item.id);
}

/** Shows my reaction as the server holds it, when a failed tap may have changed it. */
async function reread(item) {
  try {
    const { json, headers } = await api.reaction(item.id);
    item.confirmed = { state: json.state, etag: headers.get("etag") };
    item.rollBack();
  } catch {
    // The page keeps what it showed before the tap; a reload shows the truth.
  }
}

async function refused(item, error) {
  if (!(error instanceof ApiError)) {
    showMessage("Could not reach the service: your reaction was not saved.");
  } else if (error.status === 429) {
    const seconds = error.retryAfter;
    writesBlockedUntil = Date.now() + seconds * 1000;
    showMessage(`Too many changes at once: your reaction was not saved. Try again in ${seconds} s.`);
    itemIds.forEach(render);
    setTimeout(() => itemIds.forEach(render), seconds * 1000 + 50);
  } else if (error.status === 412) {
    showMessage("Your reaction was changed elsewhere; this is what it is now.");
  } else if (error.status === 401) {
    signOut("Your sign-in has expired: sign in again.");
  } else {
    showMessage(`Your reaction was not saved: ${error.message}`);
  }
}

// ---------------------------------------------------------------- counts

async function loadPage() {
  try {
    const { json } = await api.browse(itemIds);
    for (const [id, entry] of Object.entries(json.items)) {
      const item = items.get(id);
      item.known(entry.state);
      item.counts(entry.like_count, entry.dislike_count, json.as_of, item.source);
      render(id);
    }
  } catch (error) {
    if (error.status === 401) signOut("Your sign-in has expired: sign in again.");
    else showMessage(`Could not load the items: ${error.message}`);
  }
}

function liveCounts(message) {
  const item = items.get(message.item_id);
  if (!item) return;
  polling.delete(message.item_id);
  item.counts(message.like_count, message.dislike_count, message.as_of, "live");
  render(message.item_id);
}

function socketChanged(open) {
  $("#connection").textContent = open
    ? "Live counts: on"
    : "Live counts: reconnecting (counts are polled meanwhile)";
  $("#connection").dataset.live = String(open);
  if (!open) {
    itemIds.forEach((id) => polling.add(id));
    itemIds.forEach(render);
  }
}

/**
 * Polls the public count route for the items live counts do not cover now, and for those
 * with a write of mine the counts' `as_of` has not passed yet (a live push stops once its
 * own `as_of` passes the event, which may be a moment before it passes my write).
 */
async function poll() {
  const due = itemIds.filter((id) => polling.has(id) || items.get(id).awaitingCount);
  await Promise.all(
    due.map(async (id) => {
      try {
        const { json } = await api.likeCount(id);
        const item = items.get(id);
        item.counts(json.like_count, json.dislike_count, json.as_of, polling.has(id) ? "poll" : item.source);
        render(id);
      } catch {
        // The next tick tries again.
      }
    }),
  );
}

// ---------------------------------------------------------------- lists

/** A list read page by page; its "More" button reads the next page. */
class PagedList {
  constructor(list, more, read, text, what) {
    Object.assign(this, { list, more, read, text, what, cursor: null });
    more.addEventListener("click", () => this.load(true));
  }

  async load(more = false) {
    const asked = this.what();
    try {
      const { json } = await this.read(more ? this.cursor : null);
      if (this.what() !== asked) return; // another list was asked for meanwhile
      if (!more) this.list.replaceChildren();
      for (const entry of json.items) this.list.append(listItem(this.text(entry)));
      this.cursor = json.next_cursor;
      this.more.hidden = !this.cursor;
    } catch (error) {
      showMessage(`Could not load ${asked}: ${error.message}`);
    }
  }
}

const liked = new PagedList(
  $("#liked"),
  $("#liked-more"),
  (cursor) => api.likedItems(cursor),
  (entry) => entry.item_id,
  () => "your likes",
);
const loadLiked = () => liked.load();

async function loadBoard() {
  try {
    const { json } = await api.leaderboard(board);
    $("#leaderboard").replaceChildren(
      ...json.items.map((entry) => listItem(`${entry.item_id}: ${entry.like_count}`)),
    );
    $("#leaderboard-as-of").textContent = json.as_of
      ? `as of ${new Date(json.as_of).toLocaleTimeString()}`
      : "as of: not known yet";
  } catch {
    // The next refresh tries again.
  }
}
for (const button of document.querySelectorAll("[data-window]")) {
  button.addEventListener("click", () => {
    board = button.dataset.window;
    for (const other of document.querySelectorAll("[data-window]")) {
      other.setAttribute("aria-pressed", String(other === button));
    }
    loadBoard();
  });
}

const likers = new PagedList(
  $("#likers"),
  $("#likers-more"),
  (cursor) => api.likers(likersOf, cursor),
  (entry) => entry.user_id,
  () => `who liked ${likersOf}`,
);

function showLikers(id) {
  likersOf = id;
  $("#likers-section").hidden = false;
  $("#likers-title").textContent = `Who liked ${id}`;
  likers.load();
}

function listItem(text) {
  const li = document.createElement("li");
  li.textContent = text;
  return li;
}

// ---------------------------------------------------------------- messages

function showMessage(text) {
  $("#message").textContent = text;
  $("#message").hidden = false;
}

function hideMessage() {
  $("#message").hidden = true;
}

const saved = JSON.parse(sessionStorage.getItem(SESSION) ?? "null");
if (saved) signedIn(saved);
else $("#sign-in").hidden = false;
