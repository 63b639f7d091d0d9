// The token: from a link's `#token=` fragment (which never reaches a server) or pasted, kept in
// sessionStorage for this tab only. Its role and hand-off are read from the JWT's payload to
// choose the pages; the API checks the signature, the console never needs to.

const KEY = "handoff.token";

export interface Claims {
  role: "owner" | "machine";
  sub: string;
  hid?: string;
  exp?: number;
}

export function getToken(): string | null {
  try {
    return sessionStorage.getItem(KEY);
  } catch {
    return null;
  }
}

export function setToken(token: string): void {
  sessionStorage.setItem(KEY, token);
}

export function clearToken(): void {
  try {
    sessionStorage.removeItem(KEY);
  } catch {
    // nothing kept, nothing to clear
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
    };
  } catch {
    return null;
  }
}

/** Whether the token's `exp` has passed (the API allows 60 s of skew; so does this). */
export function expired(c: Claims): boolean {
  return c.exp !== undefined && c.exp + 60 < Date.now() / 1000;
}
