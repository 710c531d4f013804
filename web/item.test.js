// The count arithmetic of one item, without a browser: `node --test web/` (in `make test`).

import assert from "node:assert/strict";
import { test } from "node:test";

import { ItemState, flip } from "./item.js";

const at = (seconds) => new Date(Date.UTC(2026, 11, 1, 10, 0, seconds)).toISOString();

function liked(item, seconds) {
  item.tap("LIKE");
  item.accepted({
    state: "LIKE",
    etag: '"1"',
    count_status: "queued",
    updated_at: at(seconds),
    client_like_delta: 1,
    client_dislike_delta: 0,
  });
}

test("a flip moves each count by the state machine's delta", () => {
  assert.deepEqual(flip("NONE", "LIKE"), { like: 1, dislike: 0 });
  assert.deepEqual(flip("LIKE", "DISLIKE"), { like: -1, dislike: 1 });
  assert.deepEqual(flip("DISLIKE", "NONE"), { like: 0, dislike: -1 });
});

test("a tap shows at once and a second tap on the same button takes it back", () => {
  const item = new ItemState("a");
  item.known("NONE");
  assert.equal(item.tap("LIKE"), "LIKE");
  assert.equal(item.display().like, 1);
  assert.equal(item.tap("LIKE"), "NONE");
  assert.equal(item.display().like, 0);
});

test("my like is added until as_of is a second past it, and never counted twice", () => {
  const item = new ItemState("a");
  item.known("NONE");
  item.counts(5, 0, at(0), "page");
  liked(item, 3);
  assert.deepEqual([item.display().like, item.display().counting], [6, true]);
  // The count already holds it, though as_of does not promise it yet.
  item.counts(6, 0, at(3), "live");
  assert.deepEqual([item.display().like, item.display().counting], [6, true]);
  item.counts(6, 0, at(4), "live");
  assert.deepEqual([item.display().like, item.display().counting], [6, false]);
});

test("an older as_of never replaces a newer one", () => {
  const item = new ItemState("a");
  item.counts(3, 1, at(10), "live");
  item.counts(2, 1, at(8), "poll");
  assert.equal(item.display().like, 3);
});

test("a refused tap shows what the server holds", () => {
  const item = new ItemState("a");
  item.known("LIKE");
  item.counts(1, 0, at(0), "page");
  item.tap("DISLIKE");
  assert.deepEqual([item.display().like, item.display().dislike], [0, 1]);
  item.rollBack();
  assert.equal(item.shown, "LIKE");
  assert.deepEqual([item.display().like, item.display().dislike], [1, 0]);
});

test("a count the item's rules hide stays hidden, my taps and writes included", () => {
  const item = new ItemState("a");
  item.known("NONE");
  item.counts(null, 2, at(0), "page");
  item.tap("LIKE");
  assert.deepEqual([item.display().like, item.display().dislike], [null, 2]);
  item.counts(4, 2, at(5), "poll");
  assert.equal(item.display().like, 5, "shown again once the rules show it");
});
