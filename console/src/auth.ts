// Who is signed in. An owner signs this browser in as a device: the owner token from a link's
// `#token=` fragment (which never reaches a server) or pasted is exchanged once at
// POST /v1/devices and never kept; the service sets the device's credential as an HttpOnly
// cookie that only POST /v1/devices/refresh receives. The page holds the short-lived access
// token in memory only, and refreshes it on every load and before it expires: a reload, a
// second tab, a browser restart or a push's tap lands signed in. A machine token stays per tab
// (sessionStorage), as before. Roles and hand-offs are read from the JWT's payload to choose
// the pages; the API checks the signature, the console never needs to.

import { api, HandoffError } from "./api.js";

const KEY = "handoff.token";
/** Set while this browser has a device signed in: no credential, only whether a load should ask
 * for a refresh (a browser never signed in asks nothing, and sees no refusal). */
const SIGNED_IN = "handoff.device-signed-in";
/** Refresh this long before the access token expires. */
const REFRESH_AHEAD_S = 60;
/** A refresh the network lost is tried again this much later. */
const RETRY_MS = 15_000;

export interface Claims {
  role: "owner" | "machine";
  sub: string;
  hid?: string;
  exp?: number;
  /** The device an owner's access token was minted from. */
  did?: string;
}

/** The device's access token, in memory only. */
let access: string | null = null;
let refreshTimer: ReturnType<typeof setTimeout> | undefined;
/** The sign-in or refresh under way (main.ts sets it): what acts on its own, as a push's
 * action does, waits for it. */
let signingIn: Promise<void> = Promise.resolve();

export function setSigningIn(step: Promise<void>): void {
  signingIn = step;
}

export function whenSignedIn(): Promise<void> {
  return signingIn;
}

/** Told when a refresh finds the device's sign-in ended (revoked, signed out, expired). */
let onEnded: (error: HandoffError) => void = () => {};

export function whenDeviceEnded(handler: (error: HandoffError) => void): void {
  onEnded = handler;
}

/** The token requests carry: the device's access token, or this tab's machine token. */
export function getToken(): string | null {
  if (access) return access;
  try {
    return sessionStorage.getItem(KEY);
  } catch {
    return null;
  }
}

/** Keeps a machine token for this tab. */
export function setToken(token: string): void {
  access = null;
  sessionStorage.setItem(KEY, token);
}

export function clearToken(): void {
  access = null;
  clearTimeout(refreshTimer);
  forgetDevice();
  try {
    sessionStorage.removeItem(KEY);
  } catch {
    // nothing kept, nothing to clear
  }
}

/** This browser and platform, as a device's name: "Chrome on Android". */
export function deviceName(): string {
  const ua = navigator.userAgent;
  const browser = /Edg\//.test(ua) ? "Edge" : /Firefox\//.test(ua) ? "Firefox" : /Chrom(e|ium)\//.test(ua) ? "Chrome" : /Safari\//.test(ua) ? "Safari" : "Browser";
  const platform = /Android/.test(ua) ? "Android" : /iPhone|iPad/.test(ua) ? "iOS" : /Mac OS X/.test(ua) ? "macOS" : /Windows/.test(ua) ? "Windows" : /Linux/.test(ua) ? "Linux" : "";
  return platform ? `${browser} on ${platform}` : browser;
}

/** Whether this browser has had a device signed in since it last saw the sign-in end. */
export function hasDevice(): boolean {
  try {
    return localStorage.getItem(SIGNED_IN) === "1";
  } catch {
    return false;
  }
}

function forgetDevice(): void {
  try {
    localStorage.removeItem(SIGNED_IN);
  } catch {
    // nothing kept
  }
}

function hold(token: string, expiresInS: number): void {
  access = token;
  try {
    localStorage.setItem(SIGNED_IN, "1");
  } catch {
    // without storage, a load asks for a refresh only after a sign-in in this page
  }
  try {
    sessionStorage.removeItem(KEY);
  } catch {
    // no machine token held
  }
  refreshIn(Math.max(5, expiresInS - REFRESH_AHEAD_S) * 1000);
}

/** The refresh before the access token expires; one the network lost is tried again. */
function refreshIn(ms: number): void {
  clearTimeout(refreshTimer);
  refreshTimer = setTimeout(() => {
    refresh().then(
      (ok) => {
        if (!ok) onEnded(new HandoffError(401, "auth.revoked", "this device was signed out; sign in again"));
      },
      () => refreshIn(RETRY_MS),
    );
  }, ms);
}

/** Signs this browser in as a device with `ownerToken`, which is then forgotten. */
export async function signInDevice(ownerToken: string): Promise<void> {
  const answer = await api.signInDevice(ownerToken, { name: deviceName() });
  hold(answer.access_token, answer.expires_in);
}

/** A fresh access token from the device's cookie: false when this browser has no device
 * signed in (or its sign-in ended); a network failure or 503 is thrown. */
export async function refresh(): Promise<boolean> {
  try {
    const answer = await api.refreshDevice();
    hold(answer.access_token, answer.expires_in);
    return true;
  } catch (error) {
    if (error instanceof HandoffError && (error.status === 401 || error.status === 403)) {
      access = null;
      clearTimeout(refreshTimer);
      forgetDevice();
      return false;
    }
    throw error;
  }
}

/** Whether the tab is signed in as a device (not by a machine token). */
export function onDevice(): boolean {
  return access !== null;
}

/** Signs out: ends this device's sign-in on the service, then in the page. */
export async function signOut(): Promise<void> {
  const held = access ? claims(access) : null;
  try {
    if (held?.did) await api.revokeDevice(held.did);
  } finally {
    clearToken();
  }
}

/** The payload of a JWT, or null when it is not one the console can read. */
export function claims(token: string): Claims | null {
  const part = token.split(".")[1];
  if (!part) return null;
  try {
    const b64 = part.replace(/-/g, "+").replace(/_/g, "/");
    const bytes = Uint8Array.from(atob(b64 + "=".repeat((4 - (b64.length % 4)) % 4)), (c) => c.charCodeAt(0));
    const payload: unknown = JSON.parse(new TextDecoder().decode(bytes));
    if (typeof payload !== "object" || payload === null) return null;
    const p = payload as Record<string, unknown>;
    if (p.role !== "owner" && p.role !== "machine") return null;
    return {
      role: p.role,
      sub: typeof p.sub === "string" ? p.sub : "",
      hid: typeof p.hid === "string" ? p.hid : undefined,
      exp: typeof p.exp === "number" ? p.exp : undefined,
      did: typeof p.did === "string" ? p.did : undefined,
    };
  } catch {
    return null;
  }
}

/** Whether the token's `exp` has passed (the API allows 60 s of skew; so does this). */
export function expired(c: Claims): boolean {
  return c.exp !== undefined && c.exp + 60 < Date.now() / 1000;
}
