//! The owner-level limits are stated where they take effect and where they are promised:
//! every deployable part of wrangler.toml binds the create rate limiter at exactly the named
//! limit and window, and the contract and the API guide name each new limit with its value.

use handoff_core::limits::{
    CREATES_PER_OWNER_PERIOD_S, CREATES_PER_OWNER_PER_MINUTE_MAX, HANDOFF_RETENTION_DAYS_DEFAULT,
    HANDOFF_RETENTION_DAYS_MAX, OPEN_HANDOFFS_PER_OWNER_MAX,
};
use toml_edit::{DocumentMut, Item};

const WRANGLER: &str = include_str!("../../wrangler.toml");
const OPENAPI: &str = include_str!("../../docs/openapi.yaml");
const API_GUIDE: &str = include_str!("../../docs/api.md");

/// `(limit, period)` of the `CREATE_LIMITER` in `ratelimits`, if bound there.
fn create_limiter(ratelimits: Option<&Item>) -> Option<(i64, i64)> {
    let tables = ratelimits?.as_array_of_tables()?;
    let limiter = tables.iter().find(|t| t.get("name").and_then(|n| n.as_str()) == Some("CREATE_LIMITER"))?;
    let simple = limiter.get("simple")?;
    Some((simple.get("limit")?.as_integer()?, simple.get("period")?.as_integer()?))
}

#[test]
fn every_deployable_part_binds_the_create_rate_limiter_at_the_named_limit() {
    let doc: DocumentMut = WRANGLER.parse().unwrap();
    let want = Some((i64::from(CREATES_PER_OWNER_PER_MINUTE_MAX), i64::from(CREATES_PER_OWNER_PERIOD_S)));
    assert_eq!(create_limiter(doc.get("ratelimits")), want, "the top level");
    let envs = doc["env"].as_table().unwrap();
    for (name, env) in envs.iter() {
        assert_eq!(create_limiter(env.get("ratelimits")), want, "env.{name}");
    }
    assert!([10, 60].contains(&CREATES_PER_OWNER_PERIOD_S), "the binding counts in windows of 10 or 60 seconds");
}

#[test]
fn the_contract_and_the_api_guide_name_every_owner_limit_with_its_value() {
    for (name, value) in [
        ("OPEN_HANDOFFS_PER_OWNER_MAX", OPEN_HANDOFFS_PER_OWNER_MAX.to_string()),
        ("CREATES_PER_OWNER_PER_MINUTE_MAX", CREATES_PER_OWNER_PER_MINUTE_MAX.to_string()),
        ("HANDOFF_RETENTION_DAYS_DEFAULT", HANDOFF_RETENTION_DAYS_DEFAULT.to_string()),
    ] {
        for (doc, text) in [("docs/openapi.yaml", OPENAPI), ("docs/api.md", API_GUIDE)] {
            let at = text.find(name).unwrap_or_else(|| panic!("{doc} does not name {name}"));
            let around = &text[at.saturating_sub(200)..(at + 200).min(text.len())];
            assert!(around.contains(&value), "{doc} names {name} without its value {value}: {around}");
        }
    }
    assert!(
        OPENAPI.contains(&format!("1..={HANDOFF_RETENTION_DAYS_MAX}")),
        "the contract states the retention's range"
    );
    assert!(OPENAPI.contains(&format!("Retry-After: {CREATES_PER_OWNER_PERIOD_S}")));
}
