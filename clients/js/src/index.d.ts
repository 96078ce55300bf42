// The client's types, from the server's OpenAPI document (schema.d.ts: `npm run types` makes it again).
import type { components } from "./schema.d.ts";

type Schemas = components["schemas"];
export type ErrorAnswer = Schemas["ErrorAnswer"];
export type RetrievalResult = Schemas["RetrievalResult"];
export type Enqueued = Schemas["Enqueued"];
export type JobView = Schemas["JobView"];
export type ContextView = Schemas["ContextView"];
export type Memory = Schemas["Memory"];
export type QueryFields = Omit<Schemas["QueryBody"], "query">;
export type JobFields = Omit<Schemas["JobBody"], "query">;
export type PrefetchFields = Omit<Schemas["PrefetchBody"], "query">;

export declare class FerretError extends Error {
  readonly status: number;
  readonly code: string;
  readonly field?: string;
  readonly jobId?: string;
  readonly retryAfter?: number;
}

export declare class Ferret {
  constructor(options: { url: string; key: string; namespace: string; fetch?: typeof fetch });
  query(query: string, fields?: QueryFields): Promise<RetrievalResult>;
  enqueue(query: string, fields?: JobFields): Promise<Enqueued>;
  job(jobId: string): Promise<JobView>;
  trace(jobId: string): Promise<Record<string, unknown>>;
  prefetch(conversation: string, query: string, fields?: PrefetchFields): Promise<Enqueued>;
  context(conversation: string): Promise<ContextView>;
  remember(memories: Memory[]): Promise<{ written: number }>;
  forget(ids: string[]): Promise<{ deleted: number }>;
}
