// Live counts over the WebSocket API. The socket only says when to stop trusting it: a
// `stale` message or a closed socket hands the item (or every item) to the caller's
// polling, and the next `counts` message takes it back. A closed socket is reopened with
// backoff, and the watched items are subscribed again on every open.

const KEEPALIVE_MS = 5 * 60 * 1000; // API Gateway closes a socket idle for 10 minutes
const MAX_BACKOFF_MS = 30 * 1000;
const BATCH = 50; // item ids per subscribe message

export class LiveCounts {
  /**
   * `onCounts(message)` for every counts message, `onStale(itemId)` when an item must be
   * polled, `onSocket(open)` when the socket opens or closes.
   */
  constructor(url, token, { onCounts, onStale, onSocket }) {
    this.url = `${url}/?token=${encodeURIComponent(token)}`;
    this.handlers = { onCounts, onStale, onSocket };
    this.items = new Set();
    this.backoff = 1000;
    this.closed = false;
  }

  start() {
    this.closed = false;
    this.connect();
  }

  stop() {
    this.closed = true;
    clearTimeout(this.reconnect);
    clearInterval(this.keepalive);
    this.socket?.close();
  }

  /** Watches these items from now on (and after every reconnect). */
  watch(itemIds) {
    const fresh = itemIds.filter((id) => !this.items.has(id));
    fresh.forEach((id) => this.items.add(id));
    if (this.socket?.readyState === WebSocket.OPEN) this.subscribe(fresh);
  }

  connect() {
    const socket = new WebSocket(this.url);
    this.socket = socket;
    socket.addEventListener("open", () => {
      this.backoff = 1000;
      this.handlers.onSocket(true);
      this.subscribe([...this.items]);
      clearInterval(this.keepalive);
      this.keepalive = setInterval(() => this.subscribe([...this.items]), KEEPALIVE_MS);
    });
    socket.addEventListener("message", (event) => {
      let message;
      try {
        message = JSON.parse(event.data);
      } catch {
        return;
      }
      if (message.type === "counts") this.handlers.onCounts(message);
      else if (message.type === "stale") this.handlers.onStale(message.item_id);
      else if (message.type === "error") console.warn("live counts:", message.detail);
    });
    socket.addEventListener("close", () => {
      if (this.socket !== socket) return;
      clearInterval(this.keepalive);
      this.handlers.onSocket(false);
      if (this.closed) return;
      this.reconnect = setTimeout(() => this.connect(), this.backoff);
      this.backoff = Math.min(this.backoff * 2, MAX_BACKOFF_MS);
    });
  }

  subscribe(itemIds) {
    for (let i = 0; i < itemIds.length; i += BATCH) {
      const message = { action: "subscribe", item_ids: itemIds.slice(i, i + BATCH) };
      this.socket.send(JSON.stringify(message));
    }
  }
}
