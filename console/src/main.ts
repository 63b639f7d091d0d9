// The owner's console: a hash-routed page over the API of the same Worker.
//   #/              the owner's sessions
//   #/s/<id>        one session, live
//   #/s/<id>/package  its package
//   #/devices       the owner's signed-in devices
//   #/machines      the owner's enrolled machines, and a machine's code approved
//   #/new           a new session on one of them
//   #token=<jwt>    signs in (the fragment never reaches a server) and becomes #/; while
//                   signed in with another token, only after a confirmation naming both.
//                   An owner token signs this browser in as a device (auth.ts) and is not kept.
// A machine token sees its one hand-off, with the machine's own actions.

import { HandoffError } from "./api.js";
import { claims, clearToken, expired, getToken, hasDevice, onDevice, refresh, setSigningIn, setToken, signInDevice, signOut, whenDeviceEnded, type Claims } from "./auth.js";
import { renderDevices } from "./devices.js";
import { renderMachines } from "./machines.js";
import { renderNewSession } from "./new_session.js";
import { closeDialogs, confirmDialog, wireDialogs } from "./dialogs.js";
import { byId, h } from "./dom.js";
import { renderList } from "./list.js";
import { renderPackage } from "./package.js";
import { renderSession } from "./session.js";
import { notifySwitch, wireNotify } from "./notify.js";
import { clearNotices, fail, guard, Page, say, whenUnauthorized } from "./ui.js";

let page: Page | null = null;
/** The sign-in or refresh under way: every route waits for it, so that a page asked for while
 * it runs (a push's tap, a second tab) lands signed in. */
let pending: Promise<void> = Promise.resolve();

/** Runs `step` once the sign-in under way is done, and routes after it. */
function settle(step: () => Promise<void>): void {
  pending = pending.then(step).catch((error: unknown) => fail(error));
  setSigningIn(pending);
  void pending.then(route);
}

/** Signs in with a token given by a link or pasted: an owner's signs this browser in as a
 * device, and is forgotten; a machine's stays in this tab. */
async function useToken(token: string, c: Claims): Promise<void> {
  if (c.role === "machine") {
    setToken(token);
    return;
  }
  await signInDevice(token);
}

function freshMain(): HTMLElement {
  // The page's one <main>; each page gives it its own id (#list, #session, #package).
  const main = h("main", { id: "content", tabindex: -1 });
  const old = document.querySelector("main");
  if (old) old.replaceWith(main);
  else document.body.append(main);
  return main;
}

function signedIn(c: Claims | null): void {
  const who = byId("who");
  const out = byId("sign-out");
  const devices = byId("devices-link");
  const machines = byId("machines-link");
  const fresh = byId("new-link");
  if (c) {
    who.textContent = c.role === "owner" ? `Signed in as ${c.sub} (owner)` : `Machine token for ${c.hid ?? "?"}`;
    out.hidden = false;
  } else {
    who.textContent = "";
    out.hidden = true;
  }
  devices.hidden = c?.role !== "owner";
  machines.hidden = c?.role !== "owner";
  fresh.hidden = c?.role !== "owner";
  notifySwitch(c?.role === "owner");
}

function showSignIn(main: HTMLElement, problem?: string): void {
  main.id = "sign-in-page";
  signedIn(null);
  const input = h("input", { id: "token", type: "password", autocomplete: "off", spellcheck: "false", required: true, "aria-describedby": "token-hint" });
  const form = h(
    "form",
    { id: "sign-in", novalidate: true },
    h("div", { class: "field" }, h("label", { for: "token" }, "Owner or machine token"), input),
    h("p", { id: "token-hint", class: "hint" }, "An owner token signs this browser in until you sign out (the token itself is not kept); a machine token stays in this tab. Tokens go only to this service. scripts/dev prints a sign-in link."),
    h("div", { class: "buttons" }, h("button", { type: "submit", class: "primary" }, "Sign in")),
  );
  form.addEventListener(
    "submit",
    guard((event: Event) => {
      event.preventDefault();
      const token = input.value.trim();
      const c = claims(token);
      if (!c) throw new HandoffError(400, "auth.invalid", "that is not a token this service issues (a JWT with a role)");
      input.value = "";
      clearNotices();
      settle(() => useToken(token, c));
    }),
  );
  main.replaceChildren(h("h1", null, "Sign in"), form);
  if (problem) byId("error").textContent = problem;
  input.focus();
}

function route(): void {
  page?.dispose();
  closeDialogs();
  const current = new Page();
  page = current;
  const main = freshMain();
  const hash = location.hash;

  const fromLink = /^#token=([^&]+)/.exec(hash);
  if (fromLink?.[1]) {
    let token = fromLink[1];
    try {
      token = decodeURIComponent(token);
    } catch {
      // not percent-encoded: a JWT is URL-safe as it is
    }
    history.replaceState(null, "", `${location.pathname}${location.search}#/`);
    const held = getToken();
    const heldClaims = held ? claims(held) : null;
    const next = claims(token);
    const same = heldClaims !== null && next !== null && heldClaims.role === "owner" && next.role === "owner" && heldClaims.sub === next.sub;
    if (same || held === token) {
      // The same owner again: signed in already, and the link's token is not kept.
      return route();
    }
    if (!held || !heldClaims || expired(heldClaims)) {
      // A first sign-in: nothing is replaced, nothing to ask.
      if (!next) {
        showSignIn(main, "auth.invalid: the sign-in link's token is not one this service issues");
        return;
      }
      main.replaceChildren(h("p", { class: "muted" }, "Signing in…"));
      settle(() => useToken(token, next));
      return;
    }
    // A link must never swap the signed-in token silently (a link in a package could sign the
    // owner into another account): the page stays as it is until the owner says yes.
    route();
    void switchFromLink(heldClaims, token);
    return;
  }

  const token = getToken();
  const c = token ? claims(token) : null;
  if (!token || !c) {
    if (token) clearToken();
    showSignIn(main);
    return;
  }
  if (expired(c)) {
    clearToken();
    showSignIn(main, "auth.invalid: the token has expired; sign in again");
    return;
  }
  signedIn(c);

  if (hash === "#/devices" && c.role === "owner") {
    document.title = "Devices · Hand-off console";
    renderDevices(current, main, signOutHere);
    return;
  }
  if (hash === "#/new" && c.role === "owner") {
    document.title = "New session · Hand-off console";
    renderNewSession(current, main);
    return;
  }
  if (hash === "#/machines" && c.role === "owner") {
    document.title = "Machines · Hand-off console";
    renderMachines(current, main);
    return;
  }
  const session = /^#\/s\/(ho_[0-9a-f]{32})(\/package)?\/?$/.exec(hash);
  if (c.role === "machine") {
    const own = c.hid ?? "";
    if (!/^ho_[0-9a-f]{32}$/.test(own)) {
      // The service never issues one (it refuses a machine token without its hand-off).
      clearToken();
      showSignIn(main, "auth.invalid: this machine token names no hand-off");
      return;
    }
    if (!session || session[1] !== own) {
      history.replaceState(null, "", `#/s/${own}`);
      return route();
    }
  }
  if (session?.[1]) {
    if (session[2]) renderPackage(current, main, session[1], c.role);
    else renderSession(current, main, session[1], c.role);
    document.title = session[2] ? "Package · Hand-off console" : "Session · Hand-off console";
    return;
  }
  if (hash !== "#/" && hash !== "" && hash !== "#") {
    history.replaceState(null, "", "#/");
  }
  document.title = "Sessions · Hand-off console";
  renderList(current, main);
}

/** Who a token signs in as, in words: `alice (owner)`, or a machine token's hand-off and owner. */
function subject(c: Claims): string {
  return c.role === "owner" ? `${c.sub} (owner)` : `the machine of ${c.hid ?? "?"} (owner ${c.sub})`;
}

/** A sign-in link while signed in: the token is replaced only after a confirmation naming
 * both subjects; a link whose token the console cannot read replaces nothing. */
async function switchFromLink(held: Claims, token: string): Promise<void> {
  const next = claims(token);
  if (!next) {
    fail(new HandoffError(400, "auth.invalid", `the sign-in link's token is not one this service issues; still signed in as ${subject(held)}`));
    return;
  }
  const yes = await confirmDialog(
    `Sign in as ${subject(next)}?`,
    `A sign-in link asks to replace this tab's token. You are signed in as ${subject(held)}; the link signs in as ${subject(next)}. Switch only if you opened this link to do so.`,
    `Sign in as ${next.sub}`,
    `Stay ${held.sub}`,
  );
  if (!yes) {
    say(`still signed in as ${subject(held)}: the link's token was not used`);
    return;
  }
  clearNotices();
  // The device signed in before is signed out on the service, then the link's token signs in.
  settle(async () => {
    if (onDevice()) await signOut();
    else clearToken();
    await useToken(token, next);
  });
}

/** Sign out: this device's sign-in ends on the service (or this tab's machine token is
 * forgotten), and the page shows Sign in. */
function signOutHere(): void {
  clearNotices();
  history.replaceState(null, "", "#/");
  settle(() => signOut());
}

function start(): void {
  wireDialogs();
  wireNotify();
  const toSignIn = (error: HandoffError) => {
    clearToken();
    page?.dispose();
    closeDialogs();
    page = new Page();
    showSignIn(freshMain(), error.message);
  };
  whenDeviceEnded(toSignIn);
  whenUnauthorized((error) => {
    // A device's access token refused (it expired while the page slept): one refresh, and
    // the page again; a refresh refused, or a machine token refused, is Sign in.
    if (!onDevice()) return toSignIn(error);
    settle(async () => {
      if (!(await refresh())) toSignIn(error);
    });
  });
  byId("sign-out").addEventListener("click", signOutHere);
  window.addEventListener("hashchange", () => {
    clearNotices();
    void pending.then(route);
    // A new page: the keyboard and a screen reader start at its top, not at the old link.
    const main = document.querySelector<HTMLElement>("main");
    if (main && !main.contains(document.activeElement)) main.focus({ preventScroll: true });
    window.scrollTo(0, 0);
  });
  // Nothing escapes as an uncaught error: it is shown as "code: message" instead.
  window.addEventListener("unhandledrejection", (event) => {
    event.preventDefault();
    fail(event.reason);
  });
  window.addEventListener("error", (event) => {
    event.preventDefault();
    fail(event.error ?? event.message);
  });
  // Every load refreshes the device's access token (a tab's machine token or a sign-in link
  // needs none): a revoked device lands on Sign in, a signed-in one on the page it asked for.
  const linked = location.hash.startsWith("#token=");
  if (!linked && !getToken() && hasDevice()) {
    settle(async () => {
      await refresh();
    });
    return;
  }
  route();
}

start();
