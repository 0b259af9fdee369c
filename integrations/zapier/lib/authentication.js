'use strict';
/**
 * Custom authentication: the Event API base URL and an integration key. The
 * test is the cheapest proof the key resolves to a live account
 * (`GET /perform-list?limit=1`); the label names the server and the key's
 * last four characters, as the Integrations area lists keys.
 */
/** @typedef {import('zapier-platform-core').ZObject} ZObject */
/** @typedef {import('zapier-platform-core').Bundle} Bundle */
/** @typedef {import('zapier-platform-core').HttpRequestOptions} HttpRequestOptions */
/** @typedef {import('zapier-platform-core').HttpResponse} HttpResponse */

const { baseUrl, integrationKey } = require('./connection');
const { call, expectJson } = require('./eventApi');

/**
 * @param {ZObject} z
 * @param {Bundle} bundle
 */
const test = async (z, bundle) => {
  const response = await call(z, bundle, { method: 'GET', path: '/perform-list', params: { limit: 1 } });
  const records = expectJson(z, response, Array.isArray, 'a list of preview records');
  return { host: new URL(baseUrl(z, bundle)).host, last_four: integrationKey(z, bundle).slice(-4), previewed: records.length };
};

module.exports = {
  type: 'custom',
  fields: [
    {
      key: 'base_url',
      label: 'Event API base URL',
      required: true,
      type: 'string',
      helpText:
        'The public address of your crm-relay Event API, e.g. `https://events.example.com` (the server\'s `PORT`, behind your TLS proxy). Your crm-relay operator gives it to you.',
    },
    {
      key: 'api_key',
      label: 'Integration key',
      required: true,
      type: 'password',
      helpText:
        "Starts with `crk_`. Create it in your account's Integrations area (integration keys card); it is shown once. Zapier keeps it encrypted and sends it as a Bearer token.",
    },
  ],
  test,
  /**
   * @param {ZObject} _z
   * @param {import('zapier-platform-core').Bundle<{ host: string, last_four: string }>} bundle
   */
  connectionLabel: (_z, bundle) => `${bundle.inputData.host} (key …${bundle.inputData.last_four})`,
};
