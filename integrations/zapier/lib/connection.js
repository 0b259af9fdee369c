'use strict';
/**
 * The two things a Zapier connection holds — the Event API base URL and the
 * integration key — checked before any request, so a mistake gets a sentence
 * that says how to fix it instead of a failed request.
 */
/** @typedef {import('zapier-platform-core').ZObject} ZObject */
/** @typedef {import('zapier-platform-core').Bundle} Bundle */
/** @typedef {import('zapier-platform-core').HttpRequestOptions} HttpRequestOptions */
/** @typedef {import('zapier-platform-core').HttpResponse} HttpResponse */

const contract = require('./contract.json');

const KEY = new RegExp(contract.key.pattern);
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const WHERE_KEY =
  "Create one in the account's Integrations area (integration keys card; the key is shown once) or with `crm-relay keys create --account <id>`.";

// Only a server on this machine may be plain http: Zapier's cloud never reaches loopback, so a
// connection used by live Zaps always sends the key over TLS.
/** @param {string} hostname */
const isLoopback = (hostname) =>
  hostname === 'localhost' ||
  hostname.endsWith('.localhost') ||
  /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(hostname) ||
  hostname === '[::1]';

/**
 * The base URL of `bundle.authData`, without a trailing slash; a Zapier error saying what to fix otherwise.
 * @param {ZObject} z
 * @param {Bundle} bundle
 * @returns {string}
 */
const baseUrl = (z, bundle) => {
  const raw = String((bundle.authData && bundle.authData.base_url) || '').trim();
  if (raw === '') {
    throw new z.errors.Error(
      'The Event API base URL is missing: enter the public address of your crm-relay Event API, e.g. https://events.example.com.',
      'InvalidBaseUrl',
      400,
    );
  }
  let url;
  try {
    url = new URL(raw);
  } catch (_) {
    throw new z.errors.Error(
      `The Event API base URL "${raw}" is not a URL: enter it with its scheme, e.g. https://events.example.com.`,
      'InvalidBaseUrl',
      400,
    );
  }
  if (url.protocol !== 'https:' && !(url.protocol === 'http:' && isLoopback(url.hostname))) {
    throw new z.errors.Error(
      `The Event API base URL must start with https:// (got ${url.protocol}//${url.host}): the integration key travels with every request, so only TLS is accepted.`,
      'InvalidBaseUrl',
      400,
    );
  }
  if (url.username !== '' || url.password !== '' || url.search !== '' || url.hash !== '') {
    throw new z.errors.Error(
      'The Event API base URL must not carry a user name, password, query or fragment: enter only the address, e.g. https://events.example.com, and the key in its own field.',
      'InvalidBaseUrl',
      400,
    );
  }
  return `${url.origin}${url.pathname.replace(/\/+$/, '')}`;
};

/**
 * The integration key of `bundle.authData`; a Zapier error saying what is wrong with its form otherwise.
 * @param {ZObject} z
 * @param {Bundle} bundle
 * @returns {string}
 */
const integrationKey = (z, bundle) => {
  const key = String((bundle.authData && bundle.authData.api_key) || '').trim();
  if (key === '') {
    throw new z.errors.Error(`The integration key is missing. ${WHERE_KEY}`, 'InvalidKey', 400);
  }
  if (KEY.test(key)) return key;
  if (/^bearer\s/i.test(key)) {
    throw new z.errors.Error(
      'Enter the integration key alone, without "Bearer ": the app adds the Authorization header itself.',
      'InvalidKey',
      400,
    );
  }
  if (UUID.test(key)) {
    throw new z.errors.Error(
      `This is the id of an integration key, not the key itself (the key starts with ${contract.key.prefix}). ${WHERE_KEY}`,
      'InvalidKey',
      400,
    );
  }
  throw new z.errors.Error(
    `This is not a crm-relay integration key: a key starts with ${contract.key.prefix} followed by 64 (or, for an older key, 43) letters, digits, "-" or "_". Copy it again in full, or create a new one. ${WHERE_KEY}`,
    'InvalidKey',
    400,
  );
};

module.exports = { baseUrl, integrationKey, isLoopback };
