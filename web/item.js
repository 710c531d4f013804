// One item as the page shows it: my reaction (confirmed by the server, and what the button
// shows while a tap is on its way) and its counts (the server's, with my own writes added
// until the server's `as_of` says they are counted). Pure: no DOM, no network.

const DELTAS = {
  NONE: { like: 0, dislike: 0 },
  LIKE: { like: 1, dislike: 0 },
  DISLIKE: { like: 0, dislike: 1 },
};

/** What a flip from `before` to `after` does to the counts. */
export function flip(before, after) {
  return {
    like: DELTAS[after].like - DELTAS[before].like,
    dislike: DELTAS[after].dislike - DELTAS[before].dislike,
  };
}

// A write is surely counted once `as_of` is a second past it: DynamoDB rounds commit times
// down to the second.
const COUNTED_AFTER_MS = 1000;

export class ItemState {
  constructor(id) {
    this.id = id;
    // Until the server has said what my reaction is, the buttons cannot be used.
    this.loaded = false;
    this.confirmed = { state: "NONE", etag: null };
    this.shown = "NONE";
    this.server = { like: 0, dislike: 0, asOf: null };
    // My accepted writes the server's counts may not hold yet.
    this.pending = [];
    this.source = "page";
  }

  /** Counts from the server; an older `as_of` than the one held is ignored. */
  counts(like, dislike, asOf, source) {
    const at = asOf ? Date.parse(asOf) : null;
    if (at !== null && this.server.asOf !== null && at < this.server.asOf) return;
    this.server = { like, dislike, asOf: at ?? this.server.asOf };
    this.source = source;
    if (at !== null) this.pending = this.pending.filter((p) => at < p.at + COUNTED_AFTER_MS);
  }

  /** My reaction as the server holds it (a page load). */
  known(state) {
    this.confirmed.state = state;
    this.shown = state;
    this.loaded = true;
  }

  /** Whether the page should poll this item's counts: one of my writes is not in them yet. */
  get awaitingCount() {
    return this.pending.length > 0;
  }

  /** A tap: the button shows the new state at once. Returns the state to send. */
  tap(target) {
    this.shown = this.shown === target ? "NONE" : target;
    return this.shown;
  }

  /** The server accepted a write: it is mine until the counts hold it. */
  accepted(answer) {
    this.confirmed = { state: answer.state, etag: answer.etag ?? this.confirmed.etag };
    if (answer.count_status === "queued") {
      this.pending.push({
        at: Date.parse(answer.updated_at),
        like: answer.client_like_delta,
        dislike: answer.client_dislike_delta,
        base: { like: this.server.like, dislike: this.server.dislike },
      });
    }
  }

  /** A write failed: show what the server holds. */
  rollBack() {
    this.shown = this.confirmed.state;
  }

  /** What the page shows: the server's counts, with my writes it does not hold yet; a
   * count the item's rules hide from the public (`null`) stays hidden. */
  display() {
    let { like, dislike } = this.server;
    for (const p of this.pending) {
      // Until `as_of` passes a write, the counts may hold it or not: a count that moved
      // by at least the write's delta since the write is taken to hold it.
      if (!moved(this.server.like - p.base.like, p.like)) like += p.like;
      if (!moved(this.server.dislike - p.base.dislike, p.dislike)) dislike += p.dislike;
    }
    const inFlight = flip(this.confirmed.state, this.shown);
    const shown = (server, count, delta) => (server === null ? null : Math.max(0, count + delta));
    return {
      like: shown(this.server.like, like, inFlight.like),
      dislike: shown(this.server.dislike, dislike, inFlight.dislike),
      counting: this.pending.length > 0 || this.shown !== this.confirmed.state,
      asOf: this.server.asOf,
    };
  }
}

function moved(change, delta) {
  return delta === 0 || (delta > 0 ? change >= delta : change <= delta);
}
