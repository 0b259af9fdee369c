import type { IAuthenticateGeneric, Icon, ICredentialType, INodeProperties } from 'n8n-workflow';
import contract from '../nodes/CrmRelay/shared/contract.json';

/**
 * A crm-relay account's Event API: its base URL, an integration key (sent as
 * a Bearer token) and, optionally, the account's signing secret, with which
 * the trigger verifies each delivery's Standard Webhooks signature. Its test
 * (`GET /perform-list`) is the nodes' `crmRelayApiTest` (shared/CredentialTest.ts).
 */
export class CrmRelayApi implements ICredentialType {
	name = 'crmRelayApi';

	displayName = 'CRM Relay API';

	icon: Icon = {
		light: 'file:../nodes/CrmRelay/crmRelay.svg',
		dark: 'file:../nodes/CrmRelay/crmRelay.dark.svg',
	};

	documentationUrl = 'https://www.npmjs.com/package/n8n-nodes-crm-relay#credentials';

	properties: INodeProperties[] = [
		{
			displayName: 'Event API Base URL',
			name: 'baseUrl',
			type: 'string',
			default: '',
			required: true,
			placeholder: 'https://events.example.com',
			description:
				'The public https:// address of the crm-relay Event API. Plain http:// only for a server on this machine.',
		},
		{
			displayName: 'Integration Key',
			name: 'apiKey',
			type: 'string',
			typeOptions: { password: true },
			default: '',
			required: true,
			placeholder: `${contract.key.prefix}…`,
			description:
				"From the account's Integrations area (integration keys card); it is shown once. The node sends it as a Bearer token.",
		},
		{
			displayName: 'Signing Secret',
			name: 'signingSecret',
			type: 'string',
			typeOptions: { password: true },
			default: '',
			placeholder: 'whsec_…',
			description:
				"Optional. The account's signing secret (Integrations area, signing secret card). With it, the trigger answers 401 to a delivery whose signature or timestamp does not verify, and starts no execution.",
		},
	];

	authenticate: IAuthenticateGeneric = {
		type: 'generic',
		properties: {
			headers: {
				Authorization: '=Bearer {{$credentials.apiKey.trim()}}',
			},
		},
	};
}
