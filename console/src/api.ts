// The console's client of the API: @handoff/client (clients/typescript), the one agents and
// scripts use, with its retries, Idempotency-Keys and refusals as HandoffError "code: message",
// here on this origin with the signed-in token.

import { HandoffClient } from "../../clients/typescript/src/index.js";
import { getToken } from "./auth.js";

export { HandoffError } from "../../clients/typescript/src/index.js";

export const api = new HandoffClient({
  baseUrl: location.origin,
  token: () => getToken() ?? "",
  // Never from the browser's cache (the records are live, the list asks with its own ETag),
  // and no cookies: the token is the only credential.
  fetch: (input, init) => fetch(input, { ...init, cache: "no-store", credentials: "omit" }),
});
