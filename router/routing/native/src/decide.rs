//! A batch's routing decisions, made from the plan's matches exactly as `Router.route` makes them
//! (router/routing/decisions.py): decode failure counts, the app filters' outcome, expiration of what passed
//! them, evaluation error counts, the message-group key, and per app its priority levels, presence, spillover,
//! fairness, capacity, rendezvous hashing and the consumer groups holding message groups with messages
//! outstanding. Plain Rust; `python.rs` turns the result into the Python objects.

use blake2::digest::{Update, VariableOutput};
use blake2::Blake2bVar;

use crate::bodies::{BodyProperty, RouteBodies, Schemas, Scratch, Source};
use crate::decode::{decode, is_python_space, PropType};
use crate::plan::{Batch, FxMap, Header, Matches};
use crate::prefetch::{prefetch, AHEAD};

/// How an app chooses among the matching candidates of one priority level (`AppConfig.fairness`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fairness {
    RoundRobin,
    Proportional,
    Fast,
}

/// One consumer subscription of one group, as `decisions.Candidate`.
#[derive(Clone, Debug)]
pub struct Candidate {
    pub priority: i64,
    pub max_unconfirmed: Option<i64>,
    /// The (app, group) slot: its unconfirmed count, presence and routed tally.
    pub slot: u32,
    /// `_stable_hash(group name)`, for rendezvous hashing.
    pub group_hash: u64,
    /// Its plan position; None: a group without subscriptions (matches any record).
    pub position: Option<u32>,
}

/// An app as the decisions need it (see `decisions.AppRoute`).
#[derive(Clone, Debug)]
pub struct AppSpec {
    /// `[start, end)` of its plan entries (consumer subscriptions and priority bands).
    pub span: (u32, u32),
    /// Positions of its filters; empty: every record passes.
    pub filters: Vec<u32>,
    /// In `AppRoute.levels` order: priority descending, then configuration order.
    pub candidates: Vec<Candidate>,
    pub fairness: Fairness,
    pub spillover: bool,
    pub presence_required: bool,
    /// The group_by header (an index into the decider's names) and the default group's bytes.
    pub group_by: Option<u32>,
    pub default_group: Vec<u8>,
    pub expiration_ms: Option<i64>,
    /// Positions of the priority thresholds `(priority) >= k`, k = 1..9 (empty without a priority).
    pub bands: Vec<u32>,
    pub env: u32,
    /// Its first round-robin cursor: one per priority level, highest first.
    pub cursor_base: u32,
}

struct App {
    spec: AppSpec,
    /// By position relative to `span.0`: the candidate there (`candidate` `NONE`: none), with what the choice
    /// among a record's matches reads of it, so that a match costs one read here and none in `candidates`
    /// (at 100,000 subscriptions an app holds 10,000 candidates, and those reads were the decider's misses).
    by_position: Vec<Hit>,
    unconditional: Vec<Hit>,
    slots: Vec<u32>,
}

/// A matching candidate as `decide_app` orders and groups them: its index in `AppSpec::candidates` (in level
/// order), its priority level's index (its cursor is `cursor_base` + level) and its (app, group) slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Hit {
    candidate: u32,
    level: u32,
    slot: u32,
}

const NO_HIT: Hit = Hit {
    candidate: NONE,
    level: 0,
    slot: 0,
};

pub const NONE: u32 = u32::MAX;

/// The apps a record is routed for, by environment (`RoutingTable.groups_for`), and the body properties its
/// environments read (each once, by source).
#[derive(Clone, Debug)]
pub struct Route {
    groups: Vec<(u32, Vec<u32>, bool)>,
    members: Vec<u32>,
    bodies: RouteBodies,
}

impl Route {
    /// Every app of the route, ascending.
    pub fn members(&self) -> &[u32] {
        &self.members
    }

    /// Whether a record of this route has its value read.
    pub fn reads_body(&self) -> bool {
        !self.bodies.is_empty()
    }

    /// Whether a record of this route has its value read in Confluent's wire format.
    pub fn reads_framed(&self) -> bool {
        self.bodies.reads_framed()
    }
}

/// A record's value for `Decider::read_bodies`: not read (its route reads no body), undecodable without
/// reading it (null, or larger than `body_json::MAX_BODY_BYTES`, Avro's limit too), or its bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecordValue<'a> {
    Unread,
    Undecodable,
    Bytes(&'a [u8]),
}

/// Everything fixed for a table: the apps, each plan position's owner and exactness, the environments' declared
/// header types (for counting decode failures) and the `subroute.expiration` header.
pub struct Decider {
    apps: Vec<App>,
    owner: Vec<u32>,
    exact: Vec<bool>,
    filter_count: u32,
    env_types: Vec<Vec<Option<PropType>>>,
    /// How values are encoded (`BodyProperty::source` indexes), every body property, and per environment those
    /// it reads (indexes into `body`, ascending).
    sources: Vec<Source>,
    body: Vec<BodyProperty>,
    env_body: Vec<Vec<u32>>,
    expiration_name: Option<u32>,
    pub slot_count: usize,
    pub cursor_count: usize,
}

/// The mutable routing state a batch reads and moves: per (app, group) slot the unconfirmed count, whether
/// routing adds to it (a measured group of a `Snapshot`), whether it is absent, and the records routed to it;
/// per cursor its value and whether it moved; and, when message groups are held (`holding`), per app the slot
/// holding each message-group key (`NONE`: looked up, not held), and every keyed record's placement in order.
#[derive(Clone, Debug, Default)]
pub struct State {
    pub counts: Vec<i64>,
    pub tracked: Vec<bool>,
    pub absent: Vec<bool>,
    pub routed: Vec<u32>,
    pub cursors: Vec<i64>,
    pub moved: Vec<bool>,
    pub holding: bool,
    pub held: FxMap<u32, FxMap<Vec<u8>, u32>>,
    /// (app, key, candidate) of each record routed with a message-group key, in order.
    pub placed: Vec<(u32, GroupKey, u32)>,
}

impl State {
    pub fn new(slots: usize, cursors: usize) -> State {
        State {
            counts: vec![0; slots],
            tracked: vec![false; slots],
            absent: vec![false; slots],
            routed: vec![0; slots],
            cursors: vec![0; cursors],
            moved: vec![false; cursors],
            ..State::default()
        }
    }
}

/// `decide_app`'s lists, kept across a batch's records and apps so that deciding one allocates nothing.
#[derive(Default)]
struct Lists {
    hits: Vec<Hit>,
    present: Vec<u32>,
}

/// The message-group key of a decision: a header value (a range of the batch's bytes) or the app's default.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GroupKey {
    Header(usize, usize),
    Default,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Waiting {
    /// Nothing matched (no reason).
    Unmatched,
    Capacity,
    NoConsumer,
}

/// One decision, by app index.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Made {
    Expired(u32),
    Routed {
        app: u32,
        candidate: u32,
        band: u8,
        key: Option<GroupKey>,
    },
    Pending {
        app: u32,
        reason: Waiting,
        key: Option<GroupKey>,
    },
}

/// One record's part of `Decided`'s lists.
#[derive(Clone, Copy, Debug, Default)]
pub struct Record {
    pub made: (usize, usize),
    pub filtered: (usize, usize),
    pub evaluation_errors: (usize, usize),
    pub decode_errors: (usize, usize),
}

/// The decisions of records `[0, records.len())`; `records.len()` is less than the batch when the record there
/// needs `Router.route` (an inexact entry of its apps failed to evaluate).
#[derive(Debug, Default)]
pub struct Decided {
    pub records: Vec<Record>,
    pub made: Vec<Made>,
    pub filtered: Vec<u32>,
    /// Evaluation errors: (app, count)
    pub counts: Vec<(u32, u32)>,
    /// Decode failures: (app, property name index, count)
    pub decode: Vec<(u32, u32, u32)>,
}

/// `_stable_hash`: blake2b with an 8-byte digest, big-endian.
pub fn stable_hash(data: &[u8]) -> u64 {
    let mut hasher = Blake2bVar::new(8).expect("8 is a valid blake2b digest size");
    hasher.update(data);
    let mut out = [0u8; 8];
    hasher
        .finalize_variable(&mut out)
        .expect("the buffer is the digest size");
    u64::from_be_bytes(out)
}

/// `_mix64`: splitmix64's finalizer.
pub fn mix64(mut value: u64) -> u64 {
    value = (value ^ (value >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    value = (value ^ (value >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    value ^ (value >> 31)
}

/// `durations.parse_duration_ms` (default unit ms) of ASCII text, saturating: Python's ints are unbounded, and any
/// limit past i128 compares as i128::MAX does against a record's age.
pub fn parse_duration_ms(text: &[u8]) -> Option<i128> {
    const MAX_DURATION_TEXT: usize = 32;
    if text.len() > MAX_DURATION_TEXT || !text.is_ascii() {
        return None;
    }
    let start = text.iter().position(|b| !is_python_space(*b))?;
    let end = text.iter().rposition(|b| !is_python_space(*b))? + 1;
    let body = &text[start..end];
    let digits = body.iter().take_while(|b| b.is_ascii_digit()).count();
    if digits == 0 {
        return None;
    }
    let rest = &body[digits..];
    let unit = &rest[rest.iter().take_while(|b| is_python_space(**b)).count()..];
    let scale: i128 = match unit {
        b"" | b"ms" => 1,
        b"s" => 1_000,
        b"m" => 60_000,
        b"h" => 3_600_000,
        b"d" => 86_400_000,
        _ => return None,
    };
    let value = body[..digits].iter().fold(0i128, |acc, d| {
        acc.saturating_mul(10).saturating_add(i128::from(d - b'0'))
    });
    Some(value.saturating_mul(scale))
}

impl Decider {
    /// `env_types[env]` are the declared type of each header name an environment decodes (by name index);
    /// `env_body[env]` the body properties it reads (indexes into `body`), each from one of `sources`.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        specs: Vec<AppSpec>,
        owner: Vec<u32>,
        exact: Vec<bool>,
        filter_count: u32,
        env_types: Vec<Vec<Option<PropType>>>,
        sources: Vec<Source>,
        body: Vec<BodyProperty>,
        mut env_body: Vec<Vec<u32>>,
        expiration_name: Option<u32>,
    ) -> Result<Decider, String> {
        if owner.len() != exact.len() || filter_count as usize > owner.len() {
            return Err("owner, exact and filter_count disagree".into());
        }
        if env_body.len() > env_types.len()
            || env_body.iter().flatten().any(|&i| i as usize >= body.len())
            || body.iter().any(|p| p.source as usize >= sources.len())
        {
            return Err("bad body properties".into());
        }
        env_body.resize(env_types.len(), Vec::new());
        for reads in &mut env_body {
            reads.sort_unstable();
            reads.dedup();
        }
        let mut slot_count = 0;
        let mut cursor_count = 0;
        let mut apps = Vec::with_capacity(specs.len());
        for spec in specs {
            let (start, end) = spec.span;
            if start > end || end as usize > owner.len() || spec.env as usize >= env_types.len() {
                return Err("bad app span or environment".into());
            }
            let mut by_position = vec![NO_HIT; (end - start) as usize];
            let mut unconditional = Vec::new();
            let mut level = 0;
            let mut level_slots: Vec<u32> = Vec::new();
            for (i, c) in spec.candidates.iter().enumerate() {
                if i > 0 && spec.candidates[i - 1].priority != c.priority {
                    level += 1;
                    level_slots.clear();
                }
                // `decide_app` takes each group once per level by comparing neighbours.
                if level_slots.last() != Some(&c.slot) {
                    if level_slots.contains(&c.slot) {
                        return Err("a group's candidates of one priority are not adjacent".into());
                    }
                    level_slots.push(c.slot);
                }
                let hit = Hit {
                    candidate: i as u32,
                    level,
                    slot: c.slot,
                };
                match c.position {
                    Some(p) if (start..end).contains(&p) => by_position[(p - start) as usize] = hit,
                    Some(p) => {
                        return Err(format!("candidate position {p} outside its app's span"))
                    }
                    None => unconditional.push(hit),
                }
                slot_count = slot_count.max(c.slot as usize + 1);
            }
            if !spec.candidates.is_empty() {
                cursor_count = cursor_count.max((spec.cursor_base + level) as usize + 1);
            }
            let mut slots: Vec<u32> = spec.candidates.iter().map(|c| c.slot).collect();
            slots.sort_unstable();
            slots.dedup();
            apps.push(App {
                spec,
                by_position,
                unconditional,
                slots,
            });
        }
        if owner.iter().any(|&o| o as usize >= apps.len()) {
            return Err("a position's owner is not an app".into());
        }
        Ok(Decider {
            apps,
            owner,
            exact,
            filter_count,
            env_types,
            sources,
            body,
            env_body,
            expiration_name,
            slot_count,
            cursor_count,
        })
    }

    /// A record's apps, by environment, in table order (`[(env, apps)]`).
    pub fn route(&self, groups: Vec<(u32, Vec<u32>)>) -> Result<Route, String> {
        let mut members = Vec::new();
        let mut body: Vec<u32> = Vec::new();
        let mut out = Vec::with_capacity(groups.len());
        for (env, apps) in groups {
            if apps.iter().any(|&a| a as usize >= self.apps.len()) {
                return Err("a route names an unknown app".into());
            }
            body.extend(
                self.env_body
                    .get(env as usize)
                    .ok_or("unknown environment")?,
            );
            let expiring = apps
                .iter()
                .any(|&a| self.apps[a as usize].spec.expiration_ms.is_some());
            members.extend_from_slice(&apps);
            out.push((env, apps, expiring));
        }
        members.sort_unstable();
        body.sort_unstable();
        body.dedup();
        Ok(Route {
            groups: out,
            members,
            bodies: RouteBodies::new(&self.body, &self.sources, &body),
        })
    }

    /// Each record's body properties, read once per record (the union its route's environments read): the
    /// values found go to the batch as typed values of their slots, and per record the properties that failed
    /// (an undecodable value, or a leaf of the wrong type) are returned (empty `values`: nothing is read).
    /// `schemas`: the writer schemas of the ids of values in Confluent's wire format (an id not there: the
    /// registry does not have it).
    pub fn read_bodies(
        &self,
        batch: &mut Batch,
        routes: &[Route],
        record_routes: &[u32],
        values: &[RecordValue<'_>],
        schemas: &Schemas,
    ) -> Vec<Vec<u32>> {
        let mut failures = Vec::with_capacity(values.len());
        let mut scratch = Scratch::default();
        for (r, &value) in values.iter().enumerate() {
            let mut failed = Vec::new();
            let index = record_routes.get(r).copied();
            let route = index.and_then(|i| routes.get(i as usize));
            if let (Some(route), Some(index), false) = (route, index, value == RecordValue::Unread)
            {
                let bytes = match value {
                    RecordValue::Bytes(bytes) => Some(bytes),
                    _ => None,
                };
                route.bodies.read(
                    index,
                    &self.sources,
                    &self.body,
                    schemas,
                    bytes,
                    batch,
                    &mut failed,
                    &mut scratch,
                );
            }
            batch.end_typed();
            failures.push(failed);
        }
        failures
    }

    /// Decide the batch's records in order, each on `routes[record_routes[i]]`, from the plan's
    /// `(matched, failed)` positions (`Plan::match_all`) and the body properties that failed (`read_bodies`;
    /// empty: none read); stops before a record that needs `Router.route`.
    #[allow(clippy::too_many_arguments)]
    pub fn decide(
        &self,
        batch: &Batch,
        body_failures: &[Vec<u32>],
        matches: &Matches,
        routes: &[Route],
        record_routes: &[u32],
        timestamps: &[i64],
        now_ms: i64,
        state: &mut State,
    ) -> Result<Decided, String> {
        let n = batch.records.len();
        if matches.len() != n
            || matches.decoded.len() != batch.headers.len()
            || record_routes.len() != n
            || timestamps.len() != n
        {
            return Err("the batch's lists differ in length".into());
        }
        if state.counts.len() < self.slot_count || state.cursors.len() < self.cursor_count {
            return Err("the state is smaller than the decider".into());
        }
        let mut out = Decided::default();
        out.records.reserve(n);
        out.made.reserve(n);
        let mut lists = Lists::default();
        for (r, &(start, end)) in batch.records.iter().enumerate() {
            self.ask_ahead(matches, r);
            let route = routes
                .get(record_routes[r] as usize)
                .ok_or("unknown route")?;
            let (matched, failed) = matches.record(r);
            let inexact = failed.iter().any(|&p| {
                !self.exact[p as usize]
                    && route.members.binary_search(&self.owner[p as usize]).is_ok()
            });
            if inexact {
                break;
            }
            let headers = &batch.headers[start..end];
            let made_start = out.made.len();
            let filtered_start = out.filtered.len();
            let errors_start = out.counts.len();
            let decode_start = out.decode.len();
            let mut failures: Vec<(u32, u32)> = Vec::new();
            let timestamp = timestamps[r];
            let own = if timestamp > 0 {
                self.own_expiration(headers, &batch.bytes)
            } else {
                None
            };
            let failed_body = body_failures.get(r).map_or(&[][..], Vec::as_slice);
            for (env, apps, expiring) in &route.groups {
                failures.clear();
                let decoded = &matches.decoded[start..end];
                self.decode_failures(*env, headers, decoded, &batch.bytes, &mut failures);
                for &i in &self.env_body[*env as usize] {
                    if failed_body.contains(&i) {
                        failures.push((self.body[i as usize].label, 1));
                    }
                }
                for &a in apps {
                    out.decode
                        .extend(failures.iter().map(|&(label, n)| (a, label, n)));
                    // As route: an app's own filter errors count for every app of the group.
                    let own_errors = failed
                        .iter()
                        .take_while(|&&p| p < self.filter_count)
                        .filter(|&&p| self.owner[p as usize] == a)
                        .count() as u32;
                    if own_errors > 0 {
                        add(&mut out.counts[errors_start..], a, own_errors)
                            .unwrap_or_else(|| out.counts.push((a, own_errors)));
                    }
                }
                // The filter comes first: only what passes it can expire for the app.
                let age = (timestamp > 0 && (own.is_some() || *expiring))
                    .then(|| i128::from(now_ms) - i128::from(timestamp));
                for &a in apps {
                    let app = &self.apps[a as usize];
                    let passed = app.spec.filters.is_empty()
                        || app
                            .spec
                            .filters
                            .iter()
                            .any(|p| matched.binary_search(p).is_ok());
                    if !passed {
                        out.filtered.push(a);
                        continue;
                    }
                    if let Some(age) = age {
                        let limit = own.or(app.spec.expiration_ms.map(i128::from));
                        if limit.is_some_and(|limit| age > limit) {
                            out.made.push(Made::Expired(a));
                            continue;
                        }
                    }
                    let (low, high) = app.spec.span;
                    // `error_count`: the priority's thresholds that failed are one error.
                    let (mut errored, mut priority_failed) = (0u32, false);
                    for &p in failed.iter().filter(|&&p| low <= p && p < high) {
                        if app.spec.bands.contains(&p) {
                            priority_failed = true;
                        } else {
                            errored += 1;
                        }
                    }
                    errored += u32::from(priority_failed);
                    if errored > 0 {
                        add(&mut out.counts[errors_start..], a, errored)
                            .unwrap_or_else(|| out.counts.push((a, errored)));
                    }
                    let from = matched.partition_point(|&p| p < low);
                    let to = from + matched[from..].partition_point(|&p| p < high);
                    let key = app.spec.group_by.map(|name| group_key(name, headers));
                    let made = self.decide_app(
                        a,
                        &matched[from..to],
                        key,
                        &batch.bytes,
                        state,
                        &mut lists,
                    );
                    out.made.push(made);
                }
            }
            out.records.push(Record {
                made: (made_start, out.made.len()),
                filtered: (filtered_start, out.filtered.len()),
                evaluation_errors: (errors_start, out.counts.len()),
                decode_errors: (decode_start, out.decode.len()),
            });
        }
        Ok(out)
    }

    /// Asks for what deciding the records after `r` will read of their matches, in three steps whose reads
    /// each wait on the one before: the positions' owners (`2 × AHEAD` ahead), their `Hit`s (`AHEAD` ahead), the
    /// candidates those name (`AHEAD / 2` ahead). At 100,000 subscriptions each is a miss in a table of
    /// 10,000 per app.
    fn ask_ahead(&self, matches: &Matches, r: usize) {
        let ahead = |k: usize| (r + k < matches.len()).then(|| matches.record(r + k).0);
        let hit = |p: u32| {
            let app = &self.apps[*self.owner.get(p as usize)? as usize];
            let at = p.checked_sub(app.spec.span.0)?;
            Some((app, app.by_position.get(at as usize)?))
        };
        for &p in ahead(2 * AHEAD).unwrap_or_default() {
            if let Some(owner) = self.owner.get(p as usize) {
                prefetch(owner);
            }
        }
        for &p in ahead(AHEAD).unwrap_or_default() {
            if let Some((_, h)) = hit(p) {
                prefetch(h);
            }
        }
        for &p in ahead(AHEAD / 2).unwrap_or_default() {
            if let Some(c) =
                hit(p).and_then(|(app, h)| app.spec.candidates.get(h.candidate as usize))
            {
                prefetch(c);
            }
        }
    }

    /// The message-group key app `a` reads off a record (`group_key_of`); None when the app has no group_by.
    pub fn group_key_of<'b>(
        &'b self,
        a: u32,
        headers: &[Header],
        bytes: &'b [u8],
    ) -> Option<&'b [u8]> {
        let spec = &self.apps.get(a as usize)?.spec;
        let name = spec.group_by?;
        Some(match group_key(name, headers) {
            GroupKey::Header(s, e) => &bytes[s..e],
            GroupKey::Default => &spec.default_group,
        })
    }

    /// `_held`: the candidate a record of a held message group goes by, the holder's first matching one (in
    /// level order) or else its first; None when nothing holds the key, the holder is absent or not the app's.
    fn held(&self, a: u32, key: &[u8], hits: &[Hit], absent: bool, state: &State) -> Option<u32> {
        let slot = *state.held.get(&a)?.get(key)?;
        if slot == NONE || (absent && state.absent[slot as usize]) {
            return None;
        }
        let own = self.apps[a as usize]
            .spec
            .candidates
            .iter()
            .enumerate()
            .filter(|(_, c)| c.slot == slot)
            .map(|(i, _)| i as u32);
        let mut first = None;
        for i in own {
            if hits.binary_search_by_key(&i, |h| h.candidate).is_ok() {
                return Some(i);
            }
            first = first.or(Some(i));
        }
        first
    }

    /// `message_expiration`: the first `subroute.expiration` header that parses.
    fn own_expiration(&self, headers: &[Header], bytes: &[u8]) -> Option<i128> {
        let name = self.expiration_name?;
        headers
            .iter()
            .filter(|h| h.name == name)
            .filter_map(|h| h.value)
            .find_map(|(s, e)| {
                if s == e {
                    None
                } else {
                    parse_duration_ms(&bytes[s..e])
                }
            })
    }

    /// `properties.decode_with`'s failures: every occurrence of a declared (or read) header that does not
    /// decode, counted by name into `into` (name index, count). `decoded`: the headers' outcomes in the plan
    /// (`Matches::decoded`), reused where the plan decoded a header as the type declared here.
    fn decode_failures(
        &self,
        env: u32,
        headers: &[Header],
        decoded: &[u8],
        bytes: &[u8],
        into: &mut Vec<(u32, u32)>,
    ) {
        let types = &self.env_types[env as usize];
        for (i, h) in headers.iter().enumerate() {
            if let (Some(Some(t)), Some((s, e))) = (types.get(h.name as usize), h.value) {
                let failed = match Matches::failed_in(decoded, i, *t) {
                    Some(failed) => failed,
                    None => decode(&bytes[s..e], *t).is_none(),
                };
                if failed {
                    match into.iter_mut().find(|(name, _)| *name == h.name) {
                        Some(entry) => entry.1 += 1,
                        None => into.push((h.name, 1)),
                    }
                }
            }
        }
    }

    /// `decide_app` for app `a` given its matched plan positions (ascending, within its span).
    fn decide_app(
        &self,
        a: u32,
        matched: &[u32],
        key: Option<GroupKey>,
        bytes: &[u8],
        state: &mut State,
        lists: &mut Lists,
    ) -> Made {
        let app = &self.apps[a as usize];
        let spec = &app.spec;
        let start = spec.span.0;
        let (hits, present) = (&mut lists.hits, &mut lists.present);
        hits.clear();
        hits.extend(
            (matched.iter())
                .map(|&p| app.by_position[(p - start) as usize])
                .filter(|h| h.candidate != NONE),
        );
        hits.extend_from_slice(&app.unconditional);
        if hits.is_empty() {
            return Made::Pending {
                app: a,
                reason: Waiting::Unmatched,
                key,
            };
        }
        hits.sort_unstable_by_key(|h| h.candidate);
        let absent = spec.presence_required && app.slots.iter().any(|&s| state.absent[s as usize]);
        let key_bytes: Option<&[u8]> = match key {
            Some(GroupKey::Header(s, e)) => Some(&bytes[s..e]),
            Some(GroupKey::Default) => Some(&spec.default_group),
            None => None,
        };
        let held = match key_bytes {
            Some(k) if state.holding => self.held(a, k, hits, absent, state),
            _ => None,
        };
        let mut waiting = Waiting::NoConsumer;
        let mut chosen = None;
        if let Some(c) = held {
            // The message group follows the consumer group holding its outstanding messages, and waits there.
            waiting = Waiting::Capacity;
            chosen = has_room(&spec.candidates[c as usize], state).then_some(c);
        } else {
            let key_hash = key_bytes.map(stable_hash);
            // Candidates are in level order, so a level's hits are adjacent.
            for level in hits.chunk_by(|x, y| x.level == y.level) {
                present.clear();
                let mut last = None;
                for h in level {
                    // A group once, by its first matching subscription: turns are among groups
                    // (`one_per_group`). A group's candidates of one level are adjacent (`Decider::new`).
                    if (!absent || !state.absent[h.slot as usize]) && last != Some(h.slot) {
                        present.push(h.candidate);
                        last = Some(h.slot);
                    }
                }
                if present.is_empty() {
                    continue; // nobody attached at this priority
                }
                waiting = Waiting::Capacity;
                let cursor = (spec.cursor_base + level[0].level) as usize;
                chosen = choose(app, present, key_hash, cursor, state);
                if chosen.is_some() || !spec.spillover {
                    break;
                }
            }
        }
        let Some(candidate) = chosen else {
            return Made::Pending {
                app: a,
                reason: waiting,
                key,
            };
        };
        let slot = spec.candidates[candidate as usize].slot as usize;
        state.routed[slot] += 1;
        if state.tracked[slot] {
            state.counts[slot] += 1; // Snapshot.note_routed: later records see it
        }
        if let (Some(k), Some(key), true) = (key_bytes, key, state.holding) {
            // Holders.hold: the batch's later records of this message group follow it
            let held = state.held.entry(a).or_default();
            match held.get_mut(k) {
                Some(holder) => *holder = slot as u32,
                None => {
                    held.insert(k.to_vec(), slot as u32);
                }
            }
            state.placed.push((a, key, candidate));
        }
        let band = spec
            .bands
            .iter()
            .filter(|p| matched.binary_search(p).is_ok())
            .count() as u8;
        Made::Routed {
            app: a,
            candidate,
            band,
            key,
        }
    }
}

fn add(counts: &mut [(u32, u32)], app: u32, n: u32) -> Option<()> {
    let entry = counts.iter_mut().find(|(a, _)| *a == app)?;
    entry.1 += n;
    Some(())
}

/// `group_key_of`: the last header of that name, unless null or empty; else the app's default group.
fn group_key(name: u32, headers: &[Header]) -> GroupKey {
    match headers.iter().rev().find(|h| h.name == name) {
        Some(Header {
            value: Some((s, e)),
            ..
        }) if s < e => GroupKey::Header(*s, *e),
        _ => GroupKey::Default,
    }
}

fn has_room(c: &Candidate, state: &State) -> bool {
    c.max_unconfirmed
        .is_none_or(|max| state.counts[c.slot as usize] < max)
}

fn free_fraction(c: &Candidate, state: &State) -> f64 {
    match c.max_unconfirmed {
        None => 1.0,
        // As Python's int / int for counts below 2^53.
        Some(max) => 1.0 - state.counts[c.slot as usize] as f64 / max as f64,
    }
}

/// `choose`: one candidate with room among the present matching candidates of one level.
/// `cursor`: the level's round-robin cursor.
fn choose(
    app: &App,
    matching: &[u32],
    key_hash: Option<u64>,
    cursor: usize,
    state: &mut State,
) -> Option<u32> {
    let cands = &app.spec.candidates;
    let c = |i: u32| &cands[i as usize];
    if let [only] = matching {
        return has_room(c(*only), state).then_some(*only);
    }
    if let Some(base) = key_hash {
        // Rendezvous: the first of the highest scores, as Python's max().
        let mut best = matching[0];
        let mut score = mix64(base ^ c(best).group_hash);
        for &i in &matching[1..] {
            let s = mix64(base ^ c(i).group_hash);
            if s > score {
                best = i;
                score = s;
            }
        }
        return has_room(c(best), state).then_some(best);
    }
    match app.spec.fairness {
        Fairness::Fast => matching.iter().copied().find(|&i| has_room(c(i), state)),
        Fairness::Proportional => {
            let roomy: Vec<u32> = matching
                .iter()
                .copied()
                .filter(|&i| has_room(c(i), state))
                .collect();
            let best = roomy
                .iter()
                .map(|&i| free_fraction(c(i), state))
                .fold(f64::NEG_INFINITY, f64::max);
            let ties: Vec<u32> = roomy
                .into_iter()
                .filter(|&i| free_fraction(c(i), state) == best)
                .collect();
            if ties.is_empty() {
                return None;
            }
            let start = state.cursors[cursor];
            state.cursors[cursor] = start + 1;
            state.moved[cursor] = true;
            Some(ties[start.rem_euclid(ties.len() as i64) as usize])
        }
        Fairness::RoundRobin => {
            let start = state.cursors[cursor];
            let count = matching.len() as i64;
            for step in 0..count {
                let i = matching[(start + step).rem_euclid(count) as usize];
                if has_room(c(i), state) {
                    state.cursors[cursor] = start + step + 1;
                    state.moved[cursor] = true;
                    return Some(i);
                }
            }
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::Typed;

    #[test]
    fn rendezvous_scores_are_pythons() {
        // decisions._stable_hash and _mix64(_stable_hash(key) ^ _stable_hash(group)), computed in Python.
        assert_eq!(stable_hash(b"key"), 0xce7c_ccad_c3a9_4cf5);
        assert_eq!(stable_hash(b"g0"), 0x37c5_e45b_8e52_dd72);
        assert_eq!(stable_hash(b""), 0xe4a6_a057_7479_b2b4);
        let score = |k: &[u8], g: &[u8]| mix64(stable_hash(k) ^ stable_hash(g));
        assert_eq!(score(b"key", b"g0"), 0x8219_afaa_5222_577e);
        assert_eq!(score(b"order-17", b"billing"), 0x0b00_db91_12f3_f3fa);
        assert_eq!(score(b"", b"g1"), 0xa4f2_caa6_15d3_ce6a);
    }

    #[test]
    fn durations_parse_as_pythons() {
        let p = |t: &[u8]| parse_duration_ms(t);
        assert_eq!(p(b"250ms"), Some(250));
        assert_eq!(p(b" 30 s "), Some(30_000));
        assert_eq!(p(b"5m"), Some(300_000));
        assert_eq!(p(b"1h"), Some(3_600_000));
        assert_eq!(p(b"2d"), Some(172_800_000));
        assert_eq!(p(b"7"), Some(7));
        assert_eq!(p(b"\x1c3s\x1f"), Some(3_000)); // str.strip() removes \x1c..\x1f too
        assert_eq!(p(b"12 ms "), Some(12));
        assert_eq!(p(b"x"), None);
        assert_eq!(p(b"1 x"), None);
        assert_eq!(p(b"1s5"), None);
        assert_eq!(p(b""), None);
        assert_eq!(p(b"   "), None);
        assert_eq!(p(&[b'9'; 33]), None); // longer than MAX_DURATION_TEXT
        assert_eq!(
            p(&[b'9'; 32]),
            Some(99_999_999_999_999_999_999_999_999_999_999)
        );
        assert_eq!(p(b"9999999999999999999999999999999d"), Some(i128::MAX)); // saturates
        assert_eq!(p("1\u{a0}s".as_bytes()), None); // not ASCII
    }

    fn candidate(priority: i64, max: Option<i64>, slot: u32, position: Option<u32>) -> Candidate {
        Candidate {
            priority,
            max_unconfirmed: max,
            slot,
            group_hash: stable_hash(format!("g{slot}").as_bytes()),
            position,
        }
    }

    fn app(fairness: Fairness, candidates: Vec<Candidate>) -> App {
        let n = candidates.len();
        App {
            spec: AppSpec {
                span: (0, n as u32),
                filters: vec![],
                candidates,
                fairness,
                spillover: false,
                presence_required: false,
                group_by: None,
                default_group: b"subroute.no-group".to_vec(),
                expiration_ms: None,
                bands: vec![],
                env: 0,
                cursor_base: 0,
            },
            by_position: (0..n as u32)
                .map(|i| Hit {
                    candidate: i,
                    level: 0,
                    slot: i,
                })
                .collect(),
            unconditional: vec![],
            slots: (0..n as u32).collect(),
        }
    }

    #[test]
    fn bodies_are_read_once_per_record_into_their_slots_and_failures_by_property() {
        let read = |tokens: &[&str], declared| crate::body_json::Read {
            tokens: tokens.iter().map(|t| t.as_bytes().to_vec()).collect(),
            declared,
        };
        let body = vec![
            BodyProperty {
                read: read(&["customer", "id"], PropType::Int),
                source: 0,
                slot: Some(0),
                label: 7,
            },
            BodyProperty {
                read: read(&["sku"], PropType::Str),
                source: 0,
                slot: None, // read for its failures only
                label: 8,
            },
        ];
        let spec = app(Fairness::Fast, vec![candidate(0, None, 0, None)]).spec;
        // Environment 0 reads both body properties, environment 1 none.
        let decider = Decider::new(
            vec![spec],
            vec![0],
            vec![true],
            0,
            vec![vec![], vec![]],
            vec![Source::Json],
            body,
            vec![vec![1, 0, 1]],
            None,
        )
        .expect("a valid decider");
        let routes = vec![
            decider.route(vec![(0, vec![0])]).expect("a route"),
            decider.route(vec![(1, vec![0])]).expect("a route"),
        ];
        assert!(routes[0].reads_body() && !routes[1].reads_body());
        let mut batch = Batch::default();
        for _ in 0..4 {
            batch.end_record();
        }
        let values = [
            RecordValue::Bytes(br#"{"customer": {"id": 5}, "sku": 3}"#),
            RecordValue::Undecodable,
            RecordValue::Unread,
            RecordValue::Bytes(b"{}"),
        ];
        let failures = decider.read_bodies(
            &mut batch,
            &routes,
            &[0, 0, 1, 0],
            &values,
            &Schemas::default(),
        );
        assert_eq!(failures, vec![vec![1], vec![0, 1], vec![], vec![]]);
        assert_eq!(batch.typed, vec![(0, Typed::Int(5))]);
        assert_eq!(batch.typed_records, vec![(0, 1), (1, 1), (1, 1), (1, 1)]);
        assert_eq!(decider.body[1].label, 8);
    }

    #[test]
    fn round_robin_takes_turns_and_skips_full_groups() {
        let a = app(
            Fairness::RoundRobin,
            vec![
                candidate(0, None, 0, Some(0)),
                candidate(0, Some(1), 1, Some(1)),
                candidate(0, None, 2, Some(2)),
            ],
        );
        let mut state = State::new(3, 1);
        let picks: Vec<_> = (0..4)
            .map(|_| choose(&a, &[0, 1, 2], None, 0, &mut state))
            .collect();
        assert_eq!(picks, [Some(0), Some(1), Some(2), Some(0)]);
        assert_eq!(state.cursors[0], 4);
        state.counts[1] = 1; // at its max_unconfirmed: its turn goes to the next
        assert_eq!(choose(&a, &[0, 1, 2], None, 0, &mut state), Some(2));
        assert_eq!(state.cursors[0], 6);
    }

    #[test]
    fn proportional_prefers_free_capacity_and_rotates_ties() {
        let a = app(
            Fairness::Proportional,
            vec![
                candidate(0, Some(4), 0, Some(0)),
                candidate(0, Some(4), 1, Some(1)),
                candidate(0, Some(2), 2, Some(2)),
            ],
        );
        let mut state = State::new(3, 1);
        state.counts = vec![1, 1, 1]; // free 3/4, 3/4, 1/2
        assert_eq!(choose(&a, &[0, 1, 2], None, 0, &mut state), Some(0));
        assert_eq!(choose(&a, &[0, 1, 2], None, 0, &mut state), Some(1));
        state.counts = vec![4, 4, 2];
        assert_eq!(choose(&a, &[0, 1, 2], None, 0, &mut state), None);
        assert_eq!(state.cursors[0], 2); // a full level moves no cursor
    }

    #[test]
    fn fast_takes_the_first_with_room_and_keys_stay_put() {
        let a = app(
            Fairness::Fast,
            vec![
                candidate(0, Some(1), 0, Some(0)),
                candidate(0, Some(1), 1, Some(1)),
            ],
        );
        let mut state = State::new(2, 1);
        assert_eq!(choose(&a, &[0, 1], None, 0, &mut state), Some(0));
        state.counts[0] = 1;
        assert_eq!(choose(&a, &[0, 1], None, 0, &mut state), Some(1));
        assert!(!state.moved[0]);
        // A message group goes where rendezvous puts it, or waits there.
        let base = stable_hash(b"key");
        let placed = if mix64(base ^ a.spec.candidates[0].group_hash)
            >= mix64(base ^ a.spec.candidates[1].group_hash)
        {
            0
        } else {
            1
        };
        state.counts = vec![0, 0];
        assert_eq!(choose(&a, &[0, 1], Some(base), 0, &mut state), Some(placed));
        state.counts[placed as usize] = 1;
        assert_eq!(choose(&a, &[0, 1], Some(base), 0, &mut state), None);
    }
}
