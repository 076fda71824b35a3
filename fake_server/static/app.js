// Yaoyao admin page: Settings → Hermes connection → Execution nodes. The entry module: sign-in,
// the list and its refresh, disabling, and registering a node (the form's checks, the token, the
// single download of runner.json). Calls live in api.js, the DOM in views.js.
// Rules: never put a runner token in the DOM (no text node, no attribute); the token lives in one
// module variable (pendingConfig) from the 201 registration response until the single download
// of runner.json, then it is dropped. Server strings are inserted with textContent only.
import { ApiError, MESSAGES, api, messageFor, session } from "./api.js";
import {
  $, confirmDialog, hideBanner, hideConfigCard, renderRunners, renderSources, setFieldError,
  showAdminView, showBanner, showConfigCard, showDownloaded, showLoginView, updateCommands,
} from "./views.js";

const LOOPBACK_SERVER = new Set(["127.0.0.1", "localhost", "[::1]"]);
const LOOPBACK_HERMES = new Set(["127.0.0.1", "[::1]"]);
const PROFILE_BAD = /[\/\\\u0000-\u001f]/;
const AUTO_REFRESH_MS = 10000;

const state = { sources: [], busy: false };
let pendingConfig = null; // the only place a token ever lives in this page

function handleError(err) {
  if (!(err instanceof ApiError)) { showBanner(String(err && err.message || err), ""); return; }
  if (err.code === "authentication_required") {
    showLogin();
  }
  showBanner(messageFor(err), err.code);
  if (err.code === "workspace_not_found") refresh().catch(() => {});
}

// -- views -----------------------------------------------------------------------------------
function showLogin() {
  session.csrf = ""; session.user = null;
  dropPendingConfig();
  showLoginView();
}
function showAdmin() { showAdminView(session.user); }

async function boot() {
  try {
    const s = await api("GET", "/api/app/session");
    session.csrf = s.csrfToken; session.user = s.user;
    if (!s.user.isAdmin) { showLogin(); showBanner(MESSAGES.admin_required, "admin_required"); return; }
    showAdmin();
    await refresh();
  } catch (err) {
    showLogin();
    if (err instanceof ApiError && err.code !== "authentication_required") handleError(err);
  }
}

// -- login / logout --------------------------------------------------------------------------
$("login-form").addEventListener("submit", async (ev) => {
  ev.preventDefault();
  const username = $("login-user").value.trim();
  const password = $("login-password").value;
  if (!username || !password) { showBanner("Enter your user name and password.", ""); return; }
  $("login-submit").disabled = true;
  try {
    const r = await api("POST", "/api/app/login", { username, password });
    $("login-password").value = "";
    session.csrf = r.csrfToken; session.user = r.user;
    hideBanner();
    if (!r.user.isAdmin) { showBanner(MESSAGES.admin_required, "admin_required"); return; }
    showAdmin();
    await refresh();
    $("reg-name").focus();
  } catch (err) {
    handleError(err);
  } finally {
    $("login-submit").disabled = false;
  }
});

$("logout").addEventListener("click", async () => {
  try { await api("POST", "/api/app/logout", {}); } catch (_) { /* signed out either way */ }
  showLogin();
  showBanner("Signed out.", "", "info");
});
$("banner-close").addEventListener("click", hideBanner);

// -- the list --------------------------------------------------------------------------------
async function refresh() {
  $("list-status").textContent = "Refreshing…";
  try {
    const data = await api("GET", "/api/app/admin/runners");
    state.sources = data.sources;
    renderSources(data.sources);
    renderRunners(data.runners, state.sources, confirmDisable);
    const online = data.runners.filter((r) => r.online).length;
    $("list-status").textContent =
      `${data.runners.length} node${data.runners.length === 1 ? "" : "s"}, ${online} online · updated ${new Date().toLocaleTimeString()}`;
  } catch (err) {
    $("list-status").textContent = "";
    throw err;
  }
}
$("refresh").addEventListener("click", () => { refresh().catch(handleError); });
setInterval(() => {
  if (!$("admin-view").hidden && document.visibilityState === "visible" && !$("confirm-dialog").open) {
    refresh().catch(handleError);
  }
}, AUTO_REFRESH_MS);

async function confirmDisable(r) {
  const ok = await confirmDialog(
    `Disable “${r.name}”?`,
    "The node is disconnected at once and refused from now on; its configuration file stops working. This cannot be undone — register a new node to replace it.",
    "Disable node");
  if (!ok) return;
  try {
    await api("DELETE", `/api/app/admin/runners/${encodeURIComponent(r.id)}`);
    showBanner(`“${r.name}” was disabled.`, "", "info");
    await refresh();
  } catch (err) {
    handleError(err);
  }
}

// -- registration ----------------------------------------------------------------------------
function parseURL(raw) {
  try { return new URL(raw.trim()); } catch (_) { return null; }
}
function checkServerURL(raw) {
  const u = parseURL(raw);
  if (!u || !raw.trim()) return [null, "Enter a full address such as https://yaoyao.example.com."];
  if (u.protocol !== "http:" && u.protocol !== "https:") return [null, "Use an http:// or https:// address."];
  if (u.username || u.password) return [null, "The address cannot contain a user name or password."];
  if (u.search || u.hash || raw.includes("?") || raw.includes("#") || (u.pathname !== "/" && u.pathname !== ""))
    return [null, "Enter only the origin: no path, query or fragment."];
  if (u.protocol === "http:" && !LOOPBACK_SERVER.has(u.hostname))
    return [null, "A remote node needs HTTPS; plain HTTP only works on this machine (127.0.0.1, localhost, [::1])."];
  return [u.origin, ""];
}
function checkHermesURL(raw) {
  const u = parseURL(raw);
  if (!u || !raw.trim()) return [null, "Enter the Hermes address, such as http://127.0.0.1:9119."];
  if (u.protocol !== "http:" && u.protocol !== "https:") return [null, "Use an http:// or https:// address."];
  if (u.username || u.password) return [null, "The address cannot contain a user name or password."];
  if (u.search || u.hash || raw.includes("?") || raw.includes("#")) return [null, "The address cannot have a query or fragment."];
  if (!LOOPBACK_HERMES.has(u.hostname))
    return [null, "Hermes must be on the node's loopback: use 127.0.0.1 or [::1] (not localhost)."];
  const path = u.pathname === "/" ? "" : u.pathname.replace(/\/+$/, "");
  return [u.origin + path, ""];
}
function parseProfiles(raw) {
  const out = [];
  for (const part of raw.split(",")) {
    const p = part.trim();
    if (!p) continue;
    if (p.length > 100) return [null, "Each profile name has at most 100 characters."];
    if (PROFILE_BAD.test(p)) return [null, "Profile names cannot contain /, \\ or control characters."];
    if (!out.includes(p)) out.push(p);
  }
  if (!out.length) return [null, "Enter at least one profile."];
  if (out.length > 256) return [null, "At most 256 profiles."];
  return [out, ""];
}

$("register-form").addEventListener("submit", async (ev) => {
  ev.preventDefault();
  if (state.busy) return;
  hideBanner();
  const name = $("reg-name").value.trim();
  const [profiles, profErr] = parseProfiles($("reg-profiles").value);
  const [serverURL, serverErr] = checkServerURL($("reg-server").value);
  const [hermesURL, hermesErr] = checkHermesURL($("reg-hermes").value);
  const checks = [
    setFieldError("reg-name", name ? (name.length > 100 ? "At most 100 characters." : "") : "Enter a name for the node."),
    setFieldError("reg-profiles", profErr),
    setFieldError("reg-server", serverErr),
    setFieldError("reg-hermes", hermesErr),
  ];
  if (checks.includes(false)) {
    const first = document.querySelector("#register-form [aria-invalid='true']");
    if (first) first.focus();
    return;
  }
  state.busy = true; $("register-submit").disabled = true;
  try {
    const sourceNodeId = $("reg-source").value || "local";
    const r = await api("POST", "/api/app/admin/runners", { name, sourceNodeId, allowedProfiles: profiles });
    pendingConfig = {
      protocol: 1,
      serverURL,
      runnerId: r.runner.id,
      token: r.token,
      hermesURL,
      allowedProfiles: r.runner.allowedProfiles,
      artifactRoots: [],
    };
    showConfigCard(r.runner);
    $("register-form").reset();
    $("reg-server").value = location.origin;
    await refresh().catch(handleError);
    $("download-config").focus();
  } catch (err) {
    handleError(err);
  } finally {
    state.busy = false; $("register-submit").disabled = false;
  }
});

function dropPendingConfig() {
  pendingConfig = null;
  hideConfigCard();
}
$("config-path").addEventListener("input", updateCommands);

$("download-config").addEventListener("click", () => {
  if (!pendingConfig) return;
  let text = JSON.stringify(pendingConfig, null, 2) + "\n";
  pendingConfig = null; // one download only: the token is gone from this page after this
  const url = URL.createObjectURL(new Blob([text], { type: "application/json" }));
  text = "";
  const a = document.createElement("a");
  a.href = url; a.download = "runner.json"; a.hidden = true;
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 1000);
  showDownloaded();
});

$("config-done").addEventListener("click", async () => {
  if (pendingConfig) {
    const ok = await confirmDialog("Close without downloading?",
      "runner.json has not been downloaded. Its token cannot be shown again; you would have to disable this node and register a new one.",
      "Close anyway");
    if (!ok) return;
  }
  dropPendingConfig();
  $("reg-name").focus();
});

boot();
