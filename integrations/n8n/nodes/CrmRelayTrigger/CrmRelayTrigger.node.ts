import type {
	IDataObject,
	IHookFunctions,
	INodeType,
	INodeTypeDescription,
	IWebhookFunctions,
	IWebhookResponseData,
} from 'n8n-workflow';
import { NodeConnectionTypes, NodeOperationError } from 'n8n-workflow';
import { crmRelayApiTest } from '../CrmRelay/shared/CredentialTest';
import { connection, eventApiRequest, expectShape, explain } from '../CrmRelay/shared/EventApi';
import { signatureProblem } from '../CrmRelay/shared/Signature';
import { deliverSample, NOT_READY, SAMPLE_HEADER, sampleBody } from './TestEvent';

/** What the node keeps in the workflow's static data between activations. */
interface Kept extends IDataObject {
	subscriptionId?: string;
	targetUrl?: string;
	event?: string;
}

const isSubscription = (data: unknown): data is { id: string } =>
	typeof data === 'object' && data !== null && typeof (data as IDataObject).id === 'string';

/**
 * New leads and new bookings of a crm-relay account, pushed by the Event API
 * (REST hooks). n8n's webhook lifecycle is the Event API's pair: activating
 * the workflow (or listening for a test event) subscribes n8n's webhook URL
 * with `POST /subscribe`, and the subscription id is kept in the workflow's
 * static data; deactivating it removes the subscription with
 * `DELETE /subscribe/{id}` (a 404 means it is already gone). Each delivery is
 * one item: the event's fields as crm-relay sends them. With the credential's
 * signing secret, a delivery whose Standard Webhooks signature or timestamp
 * does not verify is answered 401 and starts no execution. Listening for a
 * test event (n8n's manual mode) subscribes the test URL and delivers the
 * newest record of the chosen kind from `GET /perform-list` to it at once
 * (`TestEvent.ts`); with none, it waits for a real event.
 */
export class CrmRelayTrigger implements INodeType {
	description: INodeTypeDescription = {
		displayName: 'CRM Relay Trigger',
		name: 'crmRelayTrigger',
		icon: { light: 'file:../CrmRelay/crmRelay.svg', dark: 'file:../CrmRelay/crmRelay.dark.svg' },
		group: ['trigger'],
		version: 1,
		subtitle: '={{$parameter["event"] === "booking" ? "New Booking" : "New Lead"}}',
		description: 'Starts the workflow when crm-relay pushes a new lead or a new booking',
		defaults: {
			name: 'CRM Relay Trigger',
		},
		inputs: [],
		outputs: [NodeConnectionTypes.Main],
		credentials: [
			{
				name: 'crmRelayApi',
				required: true,
				testedBy: 'crmRelayApiTest',
			},
		],
		webhooks: [
			{
				name: 'default',
				httpMethod: 'POST',
				responseMode: 'onReceived',
				path: 'webhook',
			},
		],
		triggerPanel: {
			header: 'Waiting for crm-relay to push an event',
			executionsHelp: {
				inactive:
					"Listening subscribes n8n's test URL to the account's events and at once sends it the newest lead (or booking) of the account's preview (GET /perform-list) as the test event: its ids, source and booked are real, names, phones and emails stay empty, as a preview carries none. With none yet, it waits for the first real event; end a test call (or post a call outcome) to send one. Activate the workflow to subscribe its production URL.",
				active:
					"The workflow is active: crm-relay pushes each new event to n8n's production URL, and every one starts an execution. If the hook was removed in the Integrations area, deactivate and activate the workflow to subscribe again.",
			},
			activationHint:
				"Once you've finished building your workflow, activate it: n8n subscribes its production URL to crm-relay, and deactivating removes the subscription.",
		},
		properties: [
			{
				displayName: 'Event',
				name: 'event',
				type: 'options',
				required: true,
				default: 'lead',
				options: [
					{
						name: 'New Lead',
						value: 'lead',
						description: 'A captured lead is pushed (a booked call sends a New Booking instead)',
					},
					{
						name: 'New Booking',
						value: 'booking',
						description: 'A booked call is pushed, with its appointment',
					},
				],
			},
		],
	};

	methods = {
		credentialTest: { crmRelayApiTest },
	};

	webhookMethods = {
		default: {
			// No public subscription-list endpoint exists: the subscription this node made is the one in its static data.
			async checkExists(this: IHookFunctions): Promise<boolean> {
				const kept = this.getWorkflowStaticData('node') as Kept;
				return (
					typeof kept.subscriptionId === 'string' &&
					kept.targetUrl === this.getNodeWebhookUrl('default') &&
					kept.event === (this.getNodeParameter('event') as string)
				);
			},

			async create(this: IHookFunctions): Promise<boolean> {
				const targetUrl = this.getNodeWebhookUrl('default');
				if (targetUrl === undefined) {
					throw new NodeOperationError(
						this.getNode(),
						'n8n gave no webhook URL for this trigger to subscribe.',
					);
				}
				const event = this.getNodeParameter('event') as string;
				const path = '/subscribe';
				const answer = await eventApiRequest.call(this, 'POST', path, {
					body: { targetUrl, event },
				});
				const subscription = expectShape(
					this,
					'POST',
					path,
					explain.call(this, 'POST', path, answer),
					isSubscription,
					'a subscription id',
				);
				const kept = this.getWorkflowStaticData('node') as Kept;
				kept.subscriptionId = subscription.id;
				kept.targetUrl = targetUrl;
				kept.event = event;
				// Listening for a test event (never an activation): the sample from perform-list, read now (the
				// credential is readable only until this returns) and delivered in the background, as n8n completes
				// the test webhook's registration only once this returns.
				if (this.getMode() === 'manual' && this.getActivationMode() === 'manual') {
					const { signingSecret } = await connection.call(this);
					const body = await sampleBody.call(this, event === 'booking' ? 'booking' : 'lead');
					if (body !== undefined) {
						void deliverSample.call(this, {
							body,
							targetUrl,
							subscriptionId: subscription.id,
							signingSecret,
						});
					}
				}
				return true;
			},

			async delete(this: IHookFunctions): Promise<boolean> {
				const kept = this.getWorkflowStaticData('node') as Kept;
				const id = kept.subscriptionId;
				if (typeof id === 'string' && id !== '') {
					const path = `/subscribe/${encodeURIComponent(id)}`;
					const answer = await eventApiRequest.call(this, 'DELETE', path);
					if (answer.status === 404) {
						// "An unknown id, an already removed id or another account's id gives 404": nothing is left to remove.
						this.logger.info(
							`crm-relay has no subscription ${id} (404): it was already removed, for example in the Integrations area or after its receiver answered 410; nothing is left to remove.`,
						);
					} else {
						explain.call(this, 'DELETE', path, answer);
					}
				}
				delete kept.subscriptionId;
				delete kept.targetUrl;
				delete kept.event;
				return true;
			},
		},
	};

	async webhook(this: IWebhookFunctions): Promise<IWebhookResponseData> {
		const { signingSecret } = await connection.call(this);
		const request = this.getRequestObject();
		if (signingSecret !== undefined) {
			if (request.rawBody === undefined) await request.readRawBody();
			const problem = signatureProblem({
				secret: signingSecret,
				headers: this.getHeaderData(),
				body: request.rawBody ?? Buffer.alloc(0),
				nowSeconds: Math.floor(Date.now() / 1000),
			});
			if (problem !== undefined) {
				this.logger.warn(`CRM Relay Trigger refused a delivery (401): ${problem}`);
				this.getResponseObject()
					.status(401)
					.json({ error: `${problem} The delivery was not accepted.` });
				return { noWebhookResponse: true };
			}
		}
		const sampleFor = this.getHeaderData()[SAMPLE_HEADER];
		if (this.getMode() === 'manual' && typeof sampleFor === 'string') {
			// The sample of a test listen: taken only once n8n's registration holds the subscription it belongs to.
			const kept = this.getWorkflowStaticData('node') as Kept;
			if (kept.subscriptionId !== sampleFor) {
				this.getResponseObject()
					.status(NOT_READY)
					.json({ error: 'n8n is still registering this test webhook: send the sample again.' });
				return { noWebhookResponse: true };
			}
		}
		const event = this.getBodyData();
		const kind = this.getNodeParameter('event') as string;
		// A subscription for one kind receives only that kind; a delivery of another kind (a URL reused elsewhere) starts nothing.
		if (event.event !== kind || typeof event.id !== 'string') {
			return { webhookResponse: { ignored: true } };
		}
		return { workflowData: [this.helpers.returnJsonArray([event])] };
	}
}
