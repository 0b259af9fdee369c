'use strict';
/**
 * Requests to the crm-relay Event API and what its answers mean to a Zapier
 * user: the key goes as a Bearer token; a refused key, the rate limit, an
 * unavailable service, an unreachable address or a base URL that is not the
 * Event API each become the Zapier error a user (or Zapier's retry) can act on.
 */
/** @typedef {import('zapier-platform-core').ZObject} ZObject */
/** @typedef {import('zapier-platform-core').Bundle} Bundle */
/** @typedef {import('zapier-platform-core').HttpRequestOptions} HttpRequestOptions */
/** @typedef {import('zapier-platform-core').HttpResponse} HttpResponse */

const { baseUrl, integrationKey } = require('./connection');

// Zapier retries a ThrottledError after `delay` seconds; without a Retry-After, a minute (the rate-limit window).
const DEFAULT_DELAY_SECONDS = 60;

/**
 * @param {HttpResponse} response
 * @param {{ retryAfterSeconds?: number } | undefined} body
 */
const retryAfter = (response, body) => {
  const header = Number.parseInt(response.headers.get('retry-after') || '', 10);
  if (Number.isFinite(header) && header >= 0) return header;
  if (body && Number.isInteger(body.retryAfterSeconds)) return body.retryAfterSeconds;
  return DEFAULT_DELAY_SECONDS;
};

// The Error object's sentence, when the answer is one.
/**
 * @param {HttpResponse} response
 * @returns {{ error: string, retryAfterSeconds?: number } | undefined}
 */
const sentence = (response) => {
  try {
    const body = JSON.parse(response.content);
    return body && typeof body.error === 'string' ? body : undefined;
  } catch (_) {
    return undefined;
  }
};

/**
 * `beforeRequest`: the key as a Bearer token, and 429s left to `explainErrors`, which knows the Event API's limit.
 * @param {HttpRequestOptions & { throwForThrottlingEarly?: boolean }} request
 * @param {ZObject} z
 * @param {Bundle} bundle
 */
const addKey = (request, z, bundle) => {
  if (bundle.authData && bundle.authData.api_key !== undefined) {
    request.headers = request.headers || {};
    request.headers.Authorization = `Bearer ${integrationKey(z, bundle)}`;
  }
  request.throwForThrottlingEarly = false;
  return request;
};

/**
 * `afterResponse`: the Event API's error answers as Zapier errors.
 * @param {HttpResponse} response
 * @param {ZObject} z
 */
const explainErrors = (response, z) => {
  const status = response.status;
  if (status < 400) return response;
  const body = sentence(response);
  const said = body ? ` crm-relay said: "${body.error}"` : '';
  const path = new URL(String(response.request.url)).pathname;
  if (status === 401) {
    throw new z.errors.ExpiredAuthError(
      'crm-relay refused the integration key (401): it is mistyped, disabled, or belongs to another crm-relay server. ' +
        "Create a new key in the account's Integrations area (shown once) and reconnect this account in Zapier." +
        said,
    );
  }
  if (status === 429) {
    const delay = retryAfter(response, body);
    throw new z.errors.ThrottledError(
      `crm-relay's rate limit was reached (60 requests per integration key per minute); Zapier retries in ${delay} s.`,
      delay,
    );
  }
  if (status === 502 || status === 503 || status === 504) {
    const delay = retryAfter(response, body);
    throw new z.errors.ThrottledError(
      `crm-relay could not be reached just now (${status}); Zapier retries in ${delay} s. ` +
        'If a subscription was being created, check the hooks card in the Integrations area before turning the Zap on again.' +
        said,
      delay,
    );
  }
  if (status === 404 && response.request.method === 'DELETE' && /\/subscribe\/[^/]+$/.test(path)) {
    throw new z.errors.Error(
      `crm-relay has no such subscription for this key's account (404 for DELETE ${path}): it was already removed (for example in the Integrations area) or belongs to another account. Nothing is left to remove.` +
        said,
      'SubscriptionNotFound',
      404,
    );
  }
  if (status === 404) {
    throw new z.errors.Error(
      `No crm-relay Event API answers at this base URL (404 for ${response.request.method} ${path}): use the address of the Event API (its public port), not the internal API or the Integrations area.`,
      'NotEventApi',
      404,
    );
  }
  throw new z.errors.Error(
    `crm-relay refused the request (${status} for ${response.request.method} ${path}).${said || ' Check the base URL.'}`,
    status >= 500 ? 'ServerError' : 'Refused',
    status,
  );
};

// node-fetch's system errors (refused, unknown host, reset, timeout) carry a code; Zapier's own errors do not.
/**
 * @param {ZObject} z
 * @param {string} base
 * @param {any} error
 */
const unreachable = (z, base, error) => {
  const code = error && (error.code || (error.cause && error.cause.code));
  if (!code && !(error && (error.name === 'FetchError' || error.name === 'AbortError'))) return error;
  const why =
    code === 'ENOTFOUND' || code === 'EAI_AGAIN'
      ? 'its host name is not found'
      : code === 'ECONNREFUSED'
        ? 'the connection was refused'
        : code === 'ETIMEDOUT' || (error && error.name === 'AbortError')
          ? 'it did not answer in time'
          : String(code || error.message);
  return new z.errors.Error(
    `Could not reach the crm-relay Event API at ${base}: ${why}. Check the base URL (the public Event API address, e.g. https://events.example.com) and that the server is running.`,
    'Unreachable',
    502,
  );
};

/**
 * One request to `path` under the connection's base URL; answers the response (errors already explained).
 * @param {ZObject} z
 * @param {Bundle} bundle
 * @param {HttpRequestOptions & { path: string }} request
 * @returns {Promise<HttpResponse>}
 */
const call = async (z, bundle, request) => {
  const base = baseUrl(z, bundle);
  integrationKey(z, bundle);
  try {
    const { path, ...rest } = request;
    return await z.request({ ...rest, url: `${base}${path}` });
  } catch (error) {
    throw unreachable(z, base, error);
  }
};

/**
 * The JSON of a 2xx answer that must be `what` (checked by `isWhat`); otherwise the base URL is not the Event API.
 * @param {ZObject} z
 * @param {HttpResponse} response
 * @param {(data: any) => boolean} isWhat
 * @param {string} what
 */
const expectJson = (z, response, isWhat, what) => {
  let data;
  try {
    data = JSON.parse(response.content);
  } catch (_) {
    data = undefined;
  }
  if (!isWhat(data)) {
    throw new z.errors.Error(
      `The base URL answered ${response.request.method} ${new URL(String(response.request.url)).pathname} with ${response.status} but not with ${what}: it is not the crm-relay Event API. Use the address of the Event API (its public port).`,
      'NotEventApi',
      response.status,
    );
  }
  return data;
};

module.exports = { addKey, explainErrors, call, expectJson };
