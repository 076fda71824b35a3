// Yaoyao admin page: the calls to the admin API (protocol §7) and the words for their refusals.
// Rules: every call is same-origin JSON with credentials, no cache and no redirect; every method
// but GET carries the session's CSRF token; a failure becomes an ApiError with the server's code
// (network_error when the server cannot be reached). No DOM here, and never a runner token: a
// registration's token is handed to the caller and not kept.

export const MESSAGES = {
  runner_source_in_use: "This source already has an enabled execution node. Disable that node before registering a new one.",
  runner_source_invalid: "This source is a paired web node and cannot host an execution node.",
  runner_profile_forbidden: "Invalid profile: one or more profiles are not allowed for your account or for this source.",
  authentication_required: "You are signed out or your session has expired. Sign in again.",
  invalid_assigned_profiles: "Invalid profile: profile names cannot be blank or contain '/', '\\' or control characters.",
  invalid_credentials: "Wrong user name or password.",
  invalid_csrf: "The request was refused: the security token did not match. Reload the page and try again.",
  invalid_origin: "The request was refused because it did not come from this site.",
  admin_required: "Only administrators can manage execution nodes.",
  workspace_not_found: "That node or source no longer exists. The list has been refreshed.",
  network_error: "Cannot reach Yaoyao. Check the connection and try again.",
};

// the signed-in user and the CSRF token of their session ("" and null when signed out)
export const session = { csrf: "", user: null };

export class ApiError extends Error {
  constructor(status, code, message) { super(message); this.status = status; this.code = code; }
}

export async function api(method, path, body) {
  const headers = { Accept: "application/json" };
  if (method !== "GET") headers["X-CSRF-Token"] = session.csrf || "";
  if (body !== undefined) headers["Content-Type"] = "application/json";
  let res;
  try {
    res = await fetch(path, {
      method, headers, credentials: "same-origin", cache: "no-store", redirect: "error",
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  } catch (_) {
    throw new ApiError(0, "network_error", MESSAGES.network_error);
  }
  let data = null;
  try { data = await res.json(); } catch (_) { data = null; }
  if (!res.ok) {
    const code = (data && typeof data.code === "string") ? data.code : "http_error";
    const msg = (data && typeof data.error === "string") ? data.error : `HTTP ${res.status}`;
    throw new ApiError(res.status, code, msg);
  }
  return data;
}

export function messageFor(err) {
  if (err.code === "invalid_workspace_request") return `The server refused the form: ${err.message}.`;
  return MESSAGES[err.code] || err.message || "Something went wrong.";
}
