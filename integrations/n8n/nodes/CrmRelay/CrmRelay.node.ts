import type {
	IExecuteFunctions,
	INodeExecutionData,
	INodeType,
	INodeTypeDescription,
} from 'n8n-workflow';
import { NodeConnectionTypes, NodeOperationError } from 'n8n-workflow';
import { crmRelayApiTest } from './shared/CredentialTest';
import { recentRecords } from './shared/EventApi';
import contract from './shared/contract.json';

/**
 * The Event API's preview for workflows that poll or backfill: "Get recent
 * records" is `GET /perform-list` with its `limit`, one item per record;
 * "Only Booked" keeps the records whose `booked` is true. The Event API reads
 * no other query parameter, so that filter runs here.
 */
export class CrmRelay implements INodeType {
	description: INodeTypeDescription = {
		displayName: 'CRM Relay',
		name: 'crmRelay',
		icon: { light: 'file:crmRelay.svg', dark: 'file:crmRelay.dark.svg' },
		group: ['input'],
		version: 1,
		subtitle: '={{$parameter["operation"] === "getRecent" ? "Get recent records" : ""}}',
		description: "Read the recent records of a crm-relay account's Event API preview",
		defaults: {
			name: 'CRM Relay',
		},
		usableAsTool: true,
		inputs: [NodeConnectionTypes.Main],
		outputs: [NodeConnectionTypes.Main],
		credentials: [
			{
				name: 'crmRelayApi',
				required: true,
				testedBy: 'crmRelayApiTest',
			},
		],
		properties: [
			{
				displayName: 'Resource',
				name: 'resource',
				type: 'options',
				noDataExpression: true,
				options: [
					{
						name: 'Record',
						value: 'record',
					},
				],
				default: 'record',
			},
			{
				displayName: 'Operation',
				name: 'operation',
				type: 'options',
				noDataExpression: true,
				displayOptions: { show: { resource: ['record'] } },
				options: [
					{
						name: 'Get Recent',
						value: 'getRecent',
						action: 'Get recent records',
						description:
							'Get the most recent deliveries of the account as preview records (GET /perform-list), newest first',
					},
				],
				default: 'getRecent',
			},
			// Not named `limit`: n8n's lint holds a parameter of that name to its own convention (default 50,
			// beside Return All), and the Event API returns at most 20 records.
			{
				displayName: 'Max Records',
				name: 'maxRecords',
				type: 'number',
				typeOptions: { minValue: 1, maxValue: 20 },
				displayOptions: { show: { resource: ['record'], operation: ['getRecent'] } },
				default: 3,
				description:
					"How many of the most recent records to get, from 1 to 20 (the Event API's limit). With Only Booked, fewer may remain.",
			},
			{
				displayName: 'Only Booked',
				name: 'onlyBooked',
				type: 'boolean',
				displayOptions: { show: { resource: ['record'], operation: ['getRecent'] } },
				default: false,
				description:
					'Whether to keep only the records whose call was booked (their booked field is true). The filter runs in n8n, on the records the limit returned.',
			},
		],
	};

	methods = {
		credentialTest: { crmRelayApiTest },
	};

	async execute(this: IExecuteFunctions): Promise<INodeExecutionData[][]> {
		const items = this.getInputData();
		const returnData: INodeExecutionData[] = [];
		for (let itemIndex = 0; itemIndex < items.length; itemIndex++) {
			try {
				const limit = this.getNodeParameter('maxRecords', itemIndex) as number;
				const onlyBooked = this.getNodeParameter('onlyBooked', itemIndex, false) as boolean;
				if (
					!Number.isInteger(limit) ||
					limit < contract.preview.limitMin ||
					limit > contract.preview.limitMax
				) {
					throw new NodeOperationError(
						this.getNode(),
						`Max Records must be a whole number from ${contract.preview.limitMin} to ${contract.preview.limitMax} (got ${limit}).`,
						{ itemIndex },
					);
				}
				const records = await recentRecords.call(this, limit);
				for (const record of records) {
					if (onlyBooked && record.booked !== true) continue;
					returnData.push({ json: record, pairedItem: { item: itemIndex } });
				}
			} catch (error) {
				if (this.continueOnFail()) {
					returnData.push({
						json: { error: (error as Error).message },
						pairedItem: { item: itemIndex },
					});
					continue;
				}
				// A NodeOperationError comes back as it is; a NodeApiError keeps its message and description.
				throw new NodeOperationError(this.getNode(), error as Error, { itemIndex });
			}
		}
		return [returnData];
	}
}
