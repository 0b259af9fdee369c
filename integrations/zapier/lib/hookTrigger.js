'use strict';
/**
 * A REST Hook trigger on the Event API for one event kind: subscribe the Zap's
 * hook URL, unsubscribe it by the id the subscription answered, take each
 * delivery as it arrives, and preview with /perform-list. The output fields and
 * the sample come from the contract (lib/contract.json), because a real preview
 * record carries no name, phone, email, job type or summary: without them the
 * Zap editor could not offer those fields of a live delivery for mapping.
 */
/** @typedef {import('zapier-platform-core').ZObject} ZObject */
/** @typedef {import('zapier-platform-core').Bundle} Bundle */
/** @typedef {import('zapier-platform-core').HttpRequestOptions} HttpRequestOptions */
/** @typedef {import('zapier-platform-core').HttpResponse} HttpResponse */

const contract = require('./contract.json');
const { call, expectJson } = require('./eventApi');

const PREVIEW_LIMIT = 3;

/** @param {unknown} value @returns {value is Record<string, unknown>} */
const isObject = (value) => typeof value === 'object' && value !== null && !Array.isArray(value);

/**
 * The trigger for `kind` (`lead` or `booking`), with its key, noun and display texts.
 * @param {{ kind: 'lead' | 'booking', key: string, noun: string, label: string, description: string }} options
 */
const hookTrigger = ({ kind, key, noun, label, description }) => {
  /** @param {ZObject} z @param {Bundle} bundle */
  const performSubscribe = async (z, bundle) => {
    const response = await call(z, bundle, {
      method: 'POST',
      path: '/subscribe',
      body: { targetUrl: bundle.targetUrl, event: kind },
    });
    return expectJson(z, response, (/** @type {unknown} */ data) => isObject(data) && typeof data['id'] === 'string', 'a subscription id');
  };

  /** @param {ZObject} z @param {Bundle} bundle */
  const performUnsubscribe = async (z, bundle) => {
    const id = bundle.subscribeData && bundle.subscribeData.id;
    if (typeof id !== 'string' || id === '') {
      throw new z.errors.Error(
        "This Zap has no crm-relay subscription id to remove: remove its hook in the account's Integrations area (hooks card).",
        'NoSubscription',
        400,
      );
    }
    await call(z, bundle, { method: 'DELETE', path: `/subscribe/${encodeURIComponent(id)}` });
    return { id, removed: true };
  };

  // A delivery is one event; a subscription for `kind` only receives that kind, but a hook URL
  // reused elsewhere could receive another: it does not trigger this Zap.
  /** @param {ZObject} _z @param {Bundle} bundle */
  const perform = (_z, bundle) => {
    const event = bundle.cleanedRequest;
    return isObject(event) && event.event === kind && typeof event.id === 'string' ? [event] : [];
  };

  /** @param {ZObject} z @param {Bundle} bundle */
  const performList = async (z, bundle) => {
    const response = await call(z, bundle, { method: 'GET', path: '/perform-list', params: { limit: PREVIEW_LIMIT } });
    return expectJson(z, response, Array.isArray, 'a list of preview records');
  };

  return {
    key,
    noun,
    display: { label, description },
    operation: {
      type: 'hook',
      performSubscribe,
      performUnsubscribe,
      perform,
      performList,
      outputFields: contract[kind].outputFields,
      sample: contract[kind].sample,
    },
  };
};

module.exports = hookTrigger;
