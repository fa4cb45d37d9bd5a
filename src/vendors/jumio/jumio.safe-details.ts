/**
 * Jumio workflow details → the only facts the gateway hands on. The details
 * document carries names, dates of birth, document numbers, addresses and
 * image links (capabilities.extraction[].data, credentials[].parts[].href), so
 * nothing is copied by default: each output value is picked by name and must
 * match a strict enum/number/timestamp shape, so free text cannot slip through.
 */

export interface JumioDecision {
  type: string | null;
  label: string | null;
  riskScore: number | null;
}

export interface JumioSafeResult {
  workflowExecutionId: string;
  status: string;
  decision?: JumioDecision;
  /** capability name → its decision type (e.g. similarity: "WARNING"; "UNKNOWN": an entry's verdict could not be read) */
  capabilities?: Record<string, string>;
  completedAt?: string | null;
}

type Obj = Record<string, unknown>;

const ENUM = /^[A-Z][A-Z0-9_]{0,63}$/;
// No "_" so "__proto__" can never become a key of the output object.
const CAPABILITY = /^[A-Za-z][A-Za-z0-9]{0,63}$/;
const TIMESTAMP = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?(Z|[+-]\d{2}:?\d{2})$/;
/**
 * Several entries of one capability (one per credential) collapse to the most
 * severe. A type not listed here (one Jumio adds later) ranks above REJECTED
 * and is reported as-is: nobody knows how bad it is, and in an identity check
 * an unknown verdict must read as "look at this", never as a pass. An entry
 * whose verdict cannot be read at all counts as UNKNOWN, ranked the same.
 */
const SEVERITY = ['REJECTED', 'WARNING', 'NOT_EXECUTED', 'PASSED'];

function isObj(v: unknown): v is Obj {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function enumValue(v: unknown): string | null {
  return typeof v === 'string' && ENUM.test(v) ? v : null;
}

export function jumioStatus(v: unknown): string | null {
  return enumValue(v);
}

function decisionOf(v: unknown): JumioDecision {
  const d = isObj(v) ? v : {};
  const details = isObj(d.details) ? d.details : {};
  const risk = isObj(d.risk) ? d.risk : {};
  const score = risk.score;
  return {
    type: enumValue(d.type),
    label: enumValue(details.label),
    riskScore: typeof score === 'number' && Number.isFinite(score) ? score : null,
  };
}

/** What a capability entry whose verdict cannot be read (no decision, a type not in Jumio's form) reads as: worst of all. */
const UNREADABLE = 'UNKNOWN';

function capabilityType(entries: unknown): string | null {
  const list = Array.isArray(entries) ? entries : [entries];
  // An entry there but unreadable is not left out: a PASSED one beside it would make the capability read as a pass.
  const types = list.map((e) => (isObj(e) ? decisionOf(e.decision).type : null) ?? UNREADABLE);
  if (types.length === 0) return null;
  const rank = (t: string): number => SEVERITY.indexOf(t); // unknown: -1, worst of all
  return types.reduce((worst, t) => (rank(t) < rank(worst) ? t : worst));
}

export function safeJumioDetails(workflowExecutionId: string, status: string, details: unknown): JumioSafeResult {
  const d = isObj(details) ? details : {};
  const capabilities: Record<string, string> = {};
  if (isObj(d.capabilities)) {
    for (const [name, entries] of Object.entries(d.capabilities)) {
      if (!CAPABILITY.test(name)) continue;
      const type = capabilityType(entries);
      if (type !== null) capabilities[name] = type;
    }
  }
  const completedAt = typeof d.completedAt === 'string' && TIMESTAMP.test(d.completedAt) ? d.completedAt : null;
  return { workflowExecutionId, status, decision: decisionOf(d.decision), capabilities, completedAt };
}
