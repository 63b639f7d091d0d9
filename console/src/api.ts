// The console's client of the API: @handoff/client (clients/typescript), the one agents and
// scripts use, with its retries, Idempotency-Keys and refusals as HandoffError "code: message",
// here on this origin with the signed-in token.

import { HandoffClient } from "../../clients/typescript/src/index.js";
import { getToken } from "./auth.js";

export { HandoffError } from "../../clients/typescript/src/index.js";

/** The one path the device's cookie is scoped to, and the one request that sends cookies. */
const REFRESH_PATH = "/v1/devices/refresh";

export const api = new HandoffClient({
  baseUrl: location.origin,
  token: () => getToken() ?? "",
  // Never from the browser's cache (the records are live, the list asks with its own ETag).
  // No cookies but on the refresh: every other route takes the bearer token alone.
  fetch: (input, init) => {
    const url = input instanceof Request ? input.url : String(input);
    const refresh = new URL(url, location.origin).pathname === REFRESH_PATH;
    return fetch(input, { ...init, cache: "no-store", credentials: refresh ? "same-origin" : "omit" });
  },
});
