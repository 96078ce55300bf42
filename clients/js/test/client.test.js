// The client against a real `ferret serve` and real workers (tests/integration/test_js_client.py starts them and
// passes the server's URL and keys in FERRET_URL, FERRET_KEY, FERRET_READ_ONLY_KEY, FERRET_LOW_RATE_KEY).
import { test } from "node:test";
import assert from "node:assert/strict";
import { Ferret, FerretError } from "../src/index.js";

const url = process.env.FERRET_URL;
const key = process.env.FERRET_KEY;
const ferret = new Ferret({ url, key, namespace: "kitchen" });

async function refusal(promise) {
  try {
    await promise;
  } catch (error) {
    assert.ok(error instanceof FerretError, String(error));
    return error;
  }
  assert.fail("expected a FerretError");
}

async function eventually(read, done) {
  for (let i = 0; i < 600; i++) {
    const value = await read();
    if (done(value)) return value;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  assert.fail("never happened");
}

test("remember, query, prefetch and context, forget", async () => {
  const written = await ferret.remember([
    { id: "rome", type: "plan", content_body: "Flight to Rome on 3 May, economy class, seat 14C" },
    { id: "anna", type: "event", content_body: "Dinner party for Anna on Friday at eight" },
  ]);
  assert.deepEqual(written, { written: 2 });

  const result = await ferret.query("flight to Rome", { options: { max_results: 3 } });
  assert.equal(result.status, "ok");
  assert.equal(result.results[0].id, "rome");
  assert.match(result.context, /Rome/);

  const started = await ferret.prefetch("trip", "dinner party for Anna");
  assert.ok(started.job_id);
  const context = await eventually(() => ferret.context("trip"), (c) => c.ready);
  assert.equal(context.results[0].id, "anna");
  assert.equal(context.stale, false);

  const job = await ferret.enqueue("seat on the Rome flight", { queue: "batch" });
  const done = await eventually(() => ferret.job(job.job_id), (j) => j.status !== null);
  assert.equal(done.result.results[0].id, "rome");

  assert.deepEqual(await ferret.forget(["anna", "nope"]), { deleted: 1 });
  assert.equal((await ferret.context("trip")).stale, true);
});

test("a bad field is named", async () => {
  const error = await refusal(ferret.query("x", { options: { max_results: 0 } }));
  assert.equal(error.status, 422);
  assert.equal(error.field, "options.max_results");
});

test("no key, a wrong key, another namespace: 401, 401, 403", async () => {
  const none = await refusal(new Ferret({ url, key: "none", namespace: "kitchen" }).query("x"));
  assert.equal(none.status, 401);
  const wrong = await refusal(new Ferret({ url, key: key.slice(0, -4) + "AAAA", namespace: "kitchen" }).query("x"));
  assert.equal(wrong.status, 401);
  assert.equal(wrong.code, "bad_key");
  const other = await refusal(new Ferret({ url, key, namespace: "garden" }).query("x"));
  assert.equal(other.status, 403);
  assert.equal(other.code, "other_namespace");
  const reader = new Ferret({ url, key: process.env.FERRET_READ_ONLY_KEY, namespace: "kitchen" });
  const readOnly = await refusal(reader.remember([{ id: "x", content_body: "y" }]));
  assert.equal(readOnly.status, 403);
  assert.equal(readOnly.code, "read_only");
});

test("an oversized body: 413", async () => {
  const error = await refusal(ferret.remember([{ id: "big", content_body: "x".repeat(70000) }]));
  assert.equal(error.status, 413);
  assert.equal(error.code, "too_large");
});

test("past the key's rate: 429 with Retry-After", async () => {
  const limited = new Ferret({ url, key: process.env.FERRET_LOW_RATE_KEY, namespace: "kitchen" });
  await limited.context("c");
  await limited.context("c");
  const error = await refusal(limited.context("c"));
  assert.equal(error.status, 429);
  assert.equal(error.code, "rate_limited");
  assert.ok(error.retryAfter >= 1);
});
