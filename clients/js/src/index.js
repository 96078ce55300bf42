// Ferret's HTTP API from JavaScript: one class, no dependencies (the platform's fetch). Its types
// (index.d.ts) come from the server's OpenAPI document (schema.d.ts, made by openapi-typescript).

/** An answer that is not a success: the HTTP status, Ferret's error code, the field at fault if any. */
export class FerretError extends Error {
  constructor(status, body, retryAfter) {
    const error = (body && body.error) || {};
    super(error.message || `HTTP ${status}`);
    this.name = "FerretError";
    this.status = status;
    this.code = error.code || "http_" + status;
    this.field = error.field;
    this.jobId = error.job_id;
    this.retryAfter = retryAfter;
  }
}

export class Ferret {
  /**
   * @param {{url: string, key: string, namespace: string, fetch?: typeof fetch}} options
   */
  constructor({ url, key, namespace, fetch: fetcher = globalThis.fetch }) {
    if (!url || !key || !namespace) throw new TypeError("Ferret needs url, key and namespace");
    this.base = `${url.replace(/\/+$/, "")}/v1/namespaces/${encodeURIComponent(namespace)}`;
    this.key = key;
    this.fetch = fetcher;
  }

  async #call(method, path, body) {
    const response = await this.fetch(this.base + path, {
      method,
      headers: { authorization: `Bearer ${this.key}`, ...(body === undefined ? {} : { "content-type": "application/json" }) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await response.text();
    let parsed = null;
    try {
      parsed = text ? JSON.parse(text) : null;
    } catch {
      parsed = { error: { message: text.slice(0, 200) } };
    }
    if (!response.ok) {
      const retry = response.headers.get("retry-after");
      throw new FerretError(response.status, parsed, retry === null ? undefined : Number(retry));
    }
    return parsed;
  }

  /** Search and wait for the final result (`status`, `results`, `context`, ...). */
  query(query, fields = {}) {
    return this.#call("POST", "/query", { ...fields, query });
  }

  /** Enqueue a request; read it later with `job(jobId)`. */
  enqueue(query, fields = {}) {
    return this.#call("POST", "/jobs", { ...fields, query });
  }

  /** A job's final status and result, or where RQ has it. */
  job(jobId) {
    return this.#call("GET", `/jobs/${encodeURIComponent(jobId)}`);
  }

  /** A finished job's span trace. */
  trace(jobId) {
    return this.#call("GET", `/jobs/${encodeURIComponent(jobId)}/trace`);
  }

  /** Start fetching context for a conversation's next turn. */
  prefetch(conversation, query, fields = {}) {
    return this.#call("POST", `/conversations/${encodeURIComponent(conversation)}/prefetch`, { ...fields, query });
  }

  /** The conversation's freshest prefetched context (`ready: false` when none is). */
  context(conversation) {
    return this.#call("GET", `/conversations/${encodeURIComponent(conversation)}/context`);
  }

  /** Write memories (an existing id is replaced); `{written}`. */
  remember(memories) {
    return this.#call("POST", "/memories", { memories });
  }

  /** Delete memories by id; `{deleted}`. */
  forget(ids) {
    return this.#call("POST", "/memories/forget", { ids });
  }
}
