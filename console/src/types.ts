// The API's shapes, as docs/openapi.yaml gives them: the types clients/typescript generates
// from the contract (`scripts/client build`), so that a change of the contract that the
// console does not follow fails its type check (`scripts/console-build`).

import type { components } from "../../clients/typescript/src/schema.js";

type Schemas = components["schemas"];

export type Handoff = Schemas["Handoff"];
export type Action = Handoff["actions"][number];
export type Status = Schemas["Status"];
export type Suggestion = Schemas["Suggestion"];
export type Policy = Schemas["PolicyInput"];
export type MachineRuntime = Schemas["MachineRuntime"];
export type ListRow = Schemas["ListRow"];
export type TurnEntry = Schemas["TurnEntry"];
export type Steer = Schemas["Steer"];
export type OpenTurnInput = Schemas["OpenTurnInput"];
export type Decision = Schemas["Decision"];
export type Artifact = Schemas["Artifact"];
export type Blocker = Schemas["Blocker"];
export type WorkSpec = Schemas["Work"];
export type WorkRecord = Schemas["WorkRecord"];
export type PackageDoc = Schemas["Package"];
export type LatestPackage = Schemas["LatestPackage"];
export type Rejection = NonNullable<LatestPackage["rejection"]>;
export type RejectReason = Rejection["reason"];
export type CompileAnswer = Schemas["CompileAnswer"];
/** `input` (the whole of what an Allow approves) is read as optional, whether or not the
 * generated types carry it yet. */
export type Question = Schemas["Question"] & { input?: string | null };
export type ReportInput = Schemas["ReportInput"];
/** One event of a turn's timeline: a message, a tool call's change, a note. */
export type TimelineEvent = Schemas["TimelineEvent"];
