/** @crm-relay/testing — test support shared by every project. */
export * as Certificate from "./Certificate.js"
export * as Eventually from "./Eventually.js"
export * as ListenProbe from "./ListenProbe.js"
export * as MinuteWindow from "./MinuteWindow.js"
export * as RawHttp from "./RawHttp.js"
export * as EventApiFuzz from "./EventApiFuzz.js"
export * as ServerProcess from "./ServerProcess.js"
export * as WebhookReceiver from "./WebhookReceiver.js"
