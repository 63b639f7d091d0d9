// The reference's timeline (core/src/timeline.rs): `POST …/events`, a batch of one turn's
// events, checked at the edge and taken whole or refused by the hand-off object.

import { type Body, Refusal, invalid, multiLine, object, only, singleLine, utf8Bytes } from "./rules";

export const TIMELINE_EVENTS_PER_REQUEST_MAX = 64;
export const TIMELINE_BODY_BYTES_MAX = 256 * 1024;
export const TIMELINE_MESSAGE_BYTES_MAX = 16 * 1024;
export const TIMELINE_NAME_BYTES_MAX = 128;
export const TIMELINE_OUTPUT_BYTES_MAX = 4 * 1024;
export const TIMELINE_EVENTS_PER_TURN_MAX = 2_000;
export const TIMELINE_BYTES_PER_TURN_MAX = 1024 * 1024;
export const TIMELINE_TURNS_KEPT_MAX = 4;
const QUESTION_INPUT_BYTES_MAX = 16 * 1024;

export interface TimelineEvent {
  seq: number;
  kind: "message" | "tool" | "note";
  text?: string;
  id?: string;
  name?: string;
  state?: "started" | "done" | "failed";
  input?: string;
  output?: string;
  output_bytes?: number;
  duration_ms?: number;
}

export interface Batch {
  turn: number;
  events: TimelineEvent[];
}

/// What storage holds of one turn's timeline.
export interface TurnFacts {
  events: number;
  bytes: number;
}

const FIELDS = ["seq", "kind", "text", "id", "name", "state", "input", "output", "output_bytes", "duration_ms"];
const CONTROL_BUT_LINES = /[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f-\u009f]/;

const wholeNumber = (v: unknown) => Number.isSafeInteger(v) && (v as number) >= 0;

/// A text that may be empty, spans lines and is at most `max` bytes.
function within(field: string, value: unknown, max: number): string {
  if (typeof value !== "string" || !value.isWellFormed()) throw invalid(`${field}: expected a string`);
  if (utf8Bytes(value) > max) throw invalid(`${field}: longer than ${max} bytes`);
  if (CONTROL_BUT_LINES.test(value)) throw invalid(`${field}: control characters other than newlines and tabs`);
  return value;
}

function readEvent(value: unknown, at: number): TimelineEvent {
  const e = object(value, `events[${at}]`);
  const field = (name: string) => `events[${at}].${name}`;
  only(e, FIELDS, `events[${at}].`);
  if (!wholeNumber(e.seq) || (e.seq as number) < 1) throw invalid(`${field("seq")}: from 1`);
  const absent = (names: string[], kind: string) => {
    for (const name of names) {
      if (e[name] !== undefined && e[name] !== null) throw invalid(`${field(name)}: not a field of a ${kind} event`);
    }
  };
  // The stored form: the fields in the Rust Worker's order, absent ones left out.
  if (e.kind === "message" || e.kind === "note") {
    if (e.text === undefined || e.text === null) throw invalid(`${field("text")}: required`);
    const text = multiLine(field("text"), e.text, TIMELINE_MESSAGE_BYTES_MAX);
    absent(["id", "name", "state", "input", "output", "output_bytes", "duration_ms"], e.kind);
    return { seq: e.seq as number, kind: e.kind, text };
  }
  if (e.kind === "tool") {
    absent(["text"], "tool");
    const id = singleLine(field("id"), e.id ?? "", TIMELINE_NAME_BYTES_MAX);
    const name = singleLine(field("name"), e.name ?? "", TIMELINE_NAME_BYTES_MAX);
    if (e.state !== "started" && e.state !== "done" && e.state !== "failed") {
      throw invalid(`${field("state")}: required (started, done or failed)`);
    }
    const event: TimelineEvent = { seq: e.seq as number, kind: "tool", id, name, state: e.state };
    if (e.input !== undefined && e.input !== null) event.input = within(field("input"), e.input, QUESTION_INPUT_BYTES_MAX);
    if (e.output !== undefined && e.output !== null) event.output = within(field("output"), e.output, TIMELINE_OUTPUT_BYTES_MAX);
    if (e.output_bytes !== undefined && e.output_bytes !== null) {
      if (!wholeNumber(e.output_bytes)) throw invalid(`${field("output_bytes")}: a whole number`);
      if (event.output !== undefined && (e.output_bytes as number) < utf8Bytes(event.output)) {
        throw invalid(`${field("output_bytes")}: the whole output's size, at least the output's`);
      }
      event.output_bytes = e.output_bytes as number;
    }
    if (e.duration_ms !== undefined && e.duration_ms !== null) {
      if (!wholeNumber(e.duration_ms)) throw invalid(`${field("duration_ms")}: a whole number`);
      event.duration_ms = e.duration_ms as number;
    }
    return event;
  }
  if (e.kind === "steer") throw invalid(`${field("kind")}: steer is reserved for steering`);
  throw invalid(`${field("kind")}: message, tool or note`);
}

/// 1 to 64 events, each of its kind's shape, their seqs consecutive and rising.
export function readBatch(b: Body): Batch {
  only(b, ["turn", "events"]);
  if (!wholeNumber(b.turn) || (b.turn as number) < 1) throw invalid("turn: from 1");
  if (!Array.isArray(b.events) || b.events.length === 0 || b.events.length > TIMELINE_EVENTS_PER_REQUEST_MAX) {
    throw invalid(`events: 1 to ${TIMELINE_EVENTS_PER_REQUEST_MAX} events`);
  }
  const events = b.events.map(readEvent);
  for (let at = 1; at < events.length; at++) {
    if (events[at].seq !== events[at - 1].seq + 1) throw invalid(`events[${at}].seq: a batch's seqs are consecutive`);
  }
  return { turn: b.turn as number, events };
}

/// A refusal that names the turn and the seq its next event takes.
export class TimelineRefusal extends Refusal {
  constructor(code: string, message: string, readonly turn: number, readonly next?: number) {
    super(409, code, message);
  }
}

/// Decides a batch for a hand-off at turn `current`: the new events to store, `[seq, json]`,
/// and the turn's facts after them. `stored` holds the taken events the batch repeats.
export function take(batch: Batch, current: number, facts: TurnFacts, stored: Map<number, string>): { added: [number, string][]; facts: TurnFacts } {
  const turn = batch.turn;
  if (turn > current) throw new TimelineRefusal("handoff.turn_out_of_order", `turn ${turn} has not been opened: turn ${current} is current`, turn);
  const next = facts.events + 1;
  if (turn + TIMELINE_TURNS_KEPT_MAX <= current) {
    throw new TimelineRefusal("timeline.dropped", `turn ${turn}'s events were dropped: the newest ${TIMELINE_TURNS_KEPT_MAX} turns' are kept`, turn, next);
  }
  const first = batch.events[0].seq;
  if (first > next) throw new TimelineRefusal("timeline.gap", `turn ${turn}'s next event is seq ${next}; this batch starts at ${first}`, turn, next);
  const added: [number, string][] = [];
  let bytes = facts.bytes;
  for (const event of batch.events) {
    const json = JSON.stringify(event);
    if (event.seq < next) {
      if (stored.get(event.seq) !== json) {
        throw new TimelineRefusal("timeline.conflict", `turn ${turn}'s event ${event.seq} was taken with other content`, turn, next);
      }
      continue;
    }
    bytes += utf8Bytes(json);
    added.push([event.seq, json]);
  }
  const events = facts.events + added.length;
  if (events > TIMELINE_EVENTS_PER_TURN_MAX || bytes > TIMELINE_BYTES_PER_TURN_MAX) {
    throw new TimelineRefusal("timeline.full", `turn ${turn}'s timeline is full: at most ${TIMELINE_EVENTS_PER_TURN_MAX} events and ${TIMELINE_BYTES_PER_TURN_MAX} bytes a turn`, turn, next);
  }
  return { added, facts: { events, bytes } };
}
