// The HTTP API as a page on another origin calls it: a bearer token in `Authorization`, the
// answers' exposed headers (ETag, Retry-After, RateLimit) read through CORS.

/** An answer the page must act on: its status, its problem+json body, its headers. */
export class ApiError extends Error {
  constructor(status, problem, headers) {
    super(problem?.detail || problem?.message || `HTTP ${status}`);
    this.status = status;
    this.problem = problem;
    this.headers = headers;
  }

  /** Seconds the server asked us to wait (429), at least one. */
  get retryAfter() {
    return Math.max(1, Number(this.headers?.get("retry-after")) || 1);
  }
}

const RETRIES = 3;
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

export class Api {
  constructor(base, token) {
    this.base = base;
    this.token = token;
  }

  /** One request; an answer that is not 2xx throws an ApiError. */
  async request(method, path, { body, headers = {}, auth = true } = {}) {
    const init = { method, headers: { ...headers } };
    if (auth) init.headers.authorization = `Bearer ${this.token}`;
    if (body !== undefined) {
      init.headers["content-type"] = "application/json";
      init.body = JSON.stringify(body);
    }
    const response = await fetch(this.base + path, init);
    const text = await response.text();
    const json = text ? JSON.parse(text) : null;
    if (!response.ok) throw new ApiError(response.status, json, response.headers);
    return { json, headers: response.headers };
  }

  /**
   * Sets my reaction. The one Idempotency-Key of the tap goes with every retry, so a retry
   * after a lost answer replays the first write instead of making a second. Network errors
   * and 5xx are retried a few times with backoff; 4xx (429 included) are the caller's.
   */
  async setReaction(itemId, state, { key, etag }) {
    const headers = { "idempotency-key": key };
    if (etag) headers["if-match"] = etag;
    const path = `/v1/items/${encodeURIComponent(itemId)}/reaction`;
    for (let attempt = 0; ; attempt++) {
      try {
        const { json, headers: answer } = await this.request("PUT", path, {
          body: { state },
          headers,
        });
        return { ...json, etag: answer.get("etag") };
      } catch (error) {
        const transient = !(error instanceof ApiError) || error.status >= 500;
        if (!transient || attempt + 1 >= RETRIES) {
          // After an attempt whose answer was lost, the write may have been made.
          error.uncertain = attempt > 0;
          throw error;
        }
        await sleep(250 * 2 ** attempt);
      }
    }
  }

  browse(itemIds) {
    return this.request("POST", "/v1/items:batchGet", { body: { item_ids: itemIds } });
  }

  reaction(itemId) {
    return this.request("GET", `/v1/items/${encodeURIComponent(itemId)}/reaction`);
  }

  /** The public, cacheable count route: no token. */
  likeCount(itemId) {
    return this.request("GET", `/v1/items/${encodeURIComponent(itemId)}/like-count`, {
      auth: false,
    });
  }

  likedItems(cursor) {
    return this.request("GET", `/v1/users/me/liked-items?${page(cursor)}`);
  }

  likers(itemId, cursor) {
    return this.request("GET", `/v1/items/${encodeURIComponent(itemId)}/likers?${page(cursor)}`);
  }

  leaderboard(window) {
    return this.request("GET", `/v1/leaderboard?window=${window}&limit=10`, { auth: false });
  }
}

function page(cursor) {
  const query = new URLSearchParams({ limit: "10" });
  if (cursor) query.set("cursor", cursor);
  return query.toString();
}
