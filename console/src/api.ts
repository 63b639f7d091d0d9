// The console's client of the API: @handoff/client (clients/typescript), the one agents and
// scripts use, with its retries, Idempotency-Keys and refusals as HandoffError "code: message",
// here on this origin with the signed-in token.

import { HandoffClient } from "../../clients/typescript/src/index.js";
import { getToken } from "./auth.js";

export { HandoffError } from "../../clients/typescript/src/index.js";

/** The requests that take the device's cookie: the sign-in sets it, the refresh sends it (the
 * cookie's own Path keeps it from every other route). */
const DEVICE_PATHS = ["/v1/devices", "/v1/devices/refresh"];

export const api = new HandoffClient({
  baseUrl: location.origin,
  token: () => getToken() ?? "",
  // Never from the browser's cache (the records are live, the list asks with its own ETag).
  // No cookies but on a device's sign-in and refresh: every other route takes the bearer token alone.
  fetch: (input, init) => {
    const url = input instanceof Request ? input.url : String(input);
    const device = DEVICE_PATHS.includes(new URL(url, location.origin).pathname);
    return fetch(input, { ...init, cache: "no-store", credentials: device ? "same-origin" : "omit" });
  },
});
