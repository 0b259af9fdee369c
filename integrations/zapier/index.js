'use strict';
/** The crm-relay Zapier app: instant triggers for new leads and new bookings on the Event API. */
const { version: platformVersion } = require('zapier-platform-core');
const { version } = require('./package.json');
const authentication = require('./lib/authentication');
const { addKey, explainErrors } = require('./lib/eventApi');
const newLead = require('./lib/triggers/newLead');
const newBooking = require('./lib/triggers/newBooking');

module.exports = {
  version,
  platformVersion,
  authentication,
  beforeRequest: [addKey],
  afterResponse: [explainErrors],
  triggers: {
    new_lead: newLead,
    new_booking: newBooking,
  },
};
