'use strict';
const hookTrigger = require('../hookTrigger');

/** Fires at once for each captured lead crm-relay pushes. */
module.exports = hookTrigger({
  kind: 'lead',
  key: 'new_lead',
  noun: 'Lead',
  label: 'New Lead',
  description: 'Triggers when a call captures a new lead (caller, job type and summary).',
});
