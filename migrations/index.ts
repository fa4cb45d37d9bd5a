import { InitialSchema1764500000000 } from './1764500000000-initial-schema.js';
import { LedgerQueryIndexes1764600000000 } from './1764600000000-ledger-query-indexes.js';
import { ApprovalInputs1764700000000 } from './1764700000000-approval-inputs.js';
import { ApprovedCallsIndex1764800000000 } from './1764800000000-approved-calls-index.js';
import { VendorTokens1764900000000 } from './1764900000000-vendor-tokens.js';
import { ShopifyRefundLeases1765000000000 } from './1765000000000-shopify-refund-leases.js';
import { LedgerSeqIdentity1765100000000 } from './1765100000000-ledger-seq-identity.js';
import { LedgerFiniteChecks1765200000000 } from './1765200000000-ledger-finite-checks.js';
import { ShopifyRefundLeasePerShop1765300000000 } from './1765300000000-shopify-refund-lease-per-shop.js';
import { LedgerSeqCeiling1765400000000 } from './1765400000000-ledger-seq-ceiling.js';
import { ToolCallVendorRefused1765500000000 } from './1765500000000-tool-call-vendor-refused.js';
import { ApprovalListingIndexes1765600000000 } from './1765600000000-approval-listing-indexes.js';
import { ToolUseUniqueColumn1765700000000 } from './1765700000000-tool-use-unique-column.js';
import { ToolUseOncePerRun1765710000000 } from './1765710000000-tool-use-once-per-run.js';
import { OrgDigestKeys1765800000000 } from './1765800000000-org-digest-keys.js';
import { ApprovalInputShownExactly1765900000000 } from './1765900000000-approval-input-shown-exactly.js';
import { ToolCallStaleAfter1766000000000 } from './1766000000000-tool-call-stale-after.js';
import { RareFilterIndexes1766100000000 } from './1766100000000-rare-filter-indexes.js';
import { ApprovalKindIndexes1766200000000 } from './1766200000000-approval-kind-indexes.js';
import { LedgerSeqCeilingBound1766300000000 } from './1766300000000-ledger-seq-ceiling-bound.js';
import { FiniteTimes1766400000000 } from './1766400000000-finite-times.js';

/** Every migration, in order. Listed explicitly so the same array loads under vitest and the built app. */
export const MIGRATIONS = [InitialSchema1764500000000, LedgerQueryIndexes1764600000000, ApprovalInputs1764700000000, ApprovedCallsIndex1764800000000, VendorTokens1764900000000, ShopifyRefundLeases1765000000000, LedgerSeqIdentity1765100000000, LedgerFiniteChecks1765200000000, ShopifyRefundLeasePerShop1765300000000, LedgerSeqCeiling1765400000000, ToolCallVendorRefused1765500000000, ApprovalListingIndexes1765600000000, ToolUseUniqueColumn1765700000000, ToolUseOncePerRun1765710000000, OrgDigestKeys1765800000000, ApprovalInputShownExactly1765900000000, ToolCallStaleAfter1766000000000, RareFilterIndexes1766100000000, ApprovalKindIndexes1766200000000, LedgerSeqCeilingBound1766300000000, FiniteTimes1766400000000];
