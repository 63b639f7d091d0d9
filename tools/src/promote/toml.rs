//! wrangler.toml and production-approvals.json in and out.
//!
//! **Architecture Invariant:** no rule lives here. Reading turns the files into plain data
//! for `plan`; `render` writes a plan that `plan` allowed, and asserts that the file reads
//! back as exactly that plan.

use std::fmt;

use toml_edit::{Array, ArrayOfTables, DocumentMut, Item, Table, TableLike, Value};

use super::{Approvals, Binding, Migration, Plan, Wrangler, BINDING_KEYS, MIGRATION_KEYS, PRODUCTION};

/// wrangler.toml could not be read as a Worker configuration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError(pub String);

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

pub fn parse_approvals(text: &str) -> Result<Approvals, ConfigError> {
    serde_json::from_str(text).map_err(|e| ConfigError(format!("production-approvals.json: {e}")))
}

pub fn read_wrangler(text: &str) -> Result<Wrangler, ConfigError> {
    let doc: DocumentMut = text.parse().map_err(|e| ConfigError(format!("wrangler.toml is not TOML: {e}")))?;
    read_document(&doc)
}

fn read_document(doc: &DocumentMut) -> Result<Wrangler, ConfigError> {
    let root = doc.as_table();
    let mut wrangler =
        Wrangler { migrations: read_migrations(root, "")?, bindings: read_bindings(root, "")?, ..Wrangler::default() };
    let envs = match root.get("env") {
        None => return Err(ConfigError("wrangler.toml has no [env.production]".to_string())),
        Some(item) => {
            item.as_table_like().ok_or_else(|| ConfigError("wrangler.toml: env is not a table".to_string()))?
        }
    };
    let mut has_production = false;
    for (name, item) in envs.iter() {
        let env =
            item.as_table_like().ok_or_else(|| ConfigError(format!("wrangler.toml: env.{name} is not a table")))?;
        let prefix = format!("env.{name}.");
        let migrations = read_migrations(env, &prefix)?;
        if name == PRODUCTION {
            has_production = true;
            wrangler.production_migrations = migrations;
            wrangler.production_bindings = read_bindings(env, &prefix)?;
        } else if !migrations.is_empty() {
            wrangler.envs.push((name.to_string(), migrations));
        }
    }
    if !has_production {
        return Err(ConfigError("wrangler.toml has no [env.production]".to_string()));
    }
    wrangler.env_vars = crate::hooks::env_vars(root).map_err(ConfigError)?;
    Ok(wrangler)
}

/// The tables of an array of tables, or of an inline array of inline tables.
fn tables<'a>(item: &'a Item, what: &str) -> Result<Vec<&'a dyn TableLike>, ConfigError> {
    if let Some(array) = item.as_array_of_tables() {
        return Ok(array.iter().map(|t| t as &dyn TableLike).collect());
    }
    let not_tables = || ConfigError(format!("wrangler.toml: {what} is not an array of tables"));
    let array = item.as_array().ok_or_else(not_tables)?;
    array.iter().map(|v| v.as_inline_table().map(|t| t as &dyn TableLike).ok_or_else(not_tables)).collect()
}

fn read_migrations(table: &dyn TableLike, prefix: &str) -> Result<Vec<Migration>, ConfigError> {
    let Some(item) = table.get("migrations") else { return Ok(Vec::new()) };
    let what = format!("{prefix}migrations");
    let mut migrations = Vec::new();
    for t in tables(item, &what)? {
        let mut m = Migration {
            tag: string(t, "tag", &what)?,
            new_classes: strings(t, "new_classes", &what)?,
            new_sqlite_classes: strings(t, "new_sqlite_classes", &what)?,
            other_keys: Vec::new(),
        };
        m.other_keys = t.iter().map(|(k, _)| k.to_string()).filter(|k| !MIGRATION_KEYS.contains(&k.as_str())).collect();
        migrations.push(m);
    }
    Ok(migrations)
}

fn read_bindings(table: &dyn TableLike, prefix: &str) -> Result<Vec<Binding>, ConfigError> {
    let Some(durable_objects) = table.get("durable_objects") else { return Ok(Vec::new()) };
    let what = format!("{prefix}durable_objects");
    let durable_objects =
        durable_objects.as_table_like().ok_or_else(|| ConfigError(format!("wrangler.toml: {what} is not a table")))?;
    let Some(item) = durable_objects.get("bindings") else { return Ok(Vec::new()) };
    let what = format!("{what}.bindings");
    let mut bindings = Vec::new();
    for t in tables(item, &what)? {
        let other_keys = t.iter().map(|(k, _)| k.to_string()).filter(|k| !BINDING_KEYS.contains(&k.as_str())).collect();
        bindings.push(Binding {
            name: string(t, "name", &what)?,
            class_name: string(t, "class_name", &what)?,
            other_keys,
        });
    }
    Ok(bindings)
}

fn string(t: &dyn TableLike, key: &str, what: &str) -> Result<String, ConfigError> {
    t.get(key)
        .and_then(Item::as_str)
        .map(str::to_string)
        .ok_or_else(|| ConfigError(format!("wrangler.toml: an entry of {what} has no string {key}")))
}

fn strings(t: &dyn TableLike, key: &str, what: &str) -> Result<Vec<String>, ConfigError> {
    let Some(item) = t.get(key) else { return Ok(Vec::new()) };
    let bad = || ConfigError(format!("wrangler.toml: {key} in {what} is not a list of strings"));
    let array = item.as_array().ok_or_else(bad)?;
    array.iter().map(|v| v.as_str().map(str::to_string).ok_or_else(bad)).collect()
}

/// Writes `plan` into the wrangler.toml `text`: production's migrations gain the approved
/// tags they lack, and production's bindings become exactly `plan.bindings` (existing
/// tables are kept with their comments). Everything else stays byte for byte. Returns the
/// new text, which equals `text` when the plan has no changes.
pub fn render(text: &str, plan: &Plan) -> Result<String, ConfigError> {
    let mut doc: DocumentMut = text.parse().map_err(|e| ConfigError(format!("wrangler.toml is not TOML: {e}")))?;
    let before = read_document(&doc)?;
    assert!(before.production_migrations.len() <= plan.migrations.len(), "plan refuses to drop applied migrations");
    if plan.changes.is_empty() {
        return Ok(text.to_string());
    }
    let was_empty = before.production_migrations.is_empty() && before.production_bindings.is_empty();
    let last = production_is_last_table(&doc);
    let production = doc
        .get_mut("env")
        .and_then(|env| env.get_mut(PRODUCTION))
        .and_then(Item::as_table_mut)
        .ok_or_else(|| ConfigError("wrangler.toml: write [env.production] as a table".to_string()))?;

    write_bindings(production, &plan.bindings)?;
    write_migrations(production, &plan.migrations[before.production_migrations.len()..])?;

    // The comment that ends the file sits under [env.production]; on the first promotion keep
    // it there instead of letting it drift below the tables written after it.
    let trailing = doc.trailing().as_str().unwrap_or("").to_string();
    if was_empty && last && !trailing.trim().is_empty() {
        if let Some(first) = first_written_table(&mut doc) {
            first.decor_mut().set_prefix(format!("{trailing}\n"));
            doc.set_trailing("");
        }
    }

    let out = doc.to_string();
    // The file must now read back as exactly the plan.
    let after = read_wrangler(&out)?;
    assert_eq!(after.production_migrations, plan.migrations, "rendered migrations match the plan");
    assert_eq!(after.production_bindings, plan.bindings, "rendered bindings match the plan");
    Ok(out)
}

fn write_bindings(production: &mut Table, bindings: &[Binding]) -> Result<(), ConfigError> {
    let bad = || ConfigError("wrangler.toml: write env.production.durable_objects as tables".to_string());
    if production.get("durable_objects").is_none() {
        if bindings.is_empty() {
            return Ok(());
        }
        let mut durable_objects = Table::new();
        durable_objects.set_implicit(true);
        production.insert("durable_objects", Item::Table(durable_objects));
    }
    let durable_objects = production["durable_objects"].as_table_mut().ok_or_else(bad)?;
    let existing: Vec<Table> = match durable_objects.get("bindings") {
        None => Vec::new(),
        Some(item) => item.as_array_of_tables().ok_or_else(bad)?.iter().cloned().collect(),
    };
    let mut array = ArrayOfTables::new();
    for b in bindings {
        let kept = existing.iter().find(|t| {
            t.get("name").and_then(Item::as_str) == Some(b.name.as_str())
                && t.get("class_name").and_then(Item::as_str) == Some(b.class_name.as_str())
        });
        let table = match kept {
            Some(t) => t.clone(),
            None => {
                let mut t = Table::new();
                t.insert("name", toml_edit::value(b.name.as_str()));
                t.insert("class_name", toml_edit::value(b.class_name.as_str()));
                t
            }
        };
        array.push(table);
    }
    if array.is_empty() {
        durable_objects.remove("bindings");
    } else {
        durable_objects.insert("bindings", Item::ArrayOfTables(array));
    }
    Ok(())
}

fn write_migrations(production: &mut Table, added: &[Migration]) -> Result<(), ConfigError> {
    if added.is_empty() {
        return Ok(());
    }
    let bad = || ConfigError("wrangler.toml: write env.production.migrations as [[tables]]".to_string());
    if production.get("migrations").is_none() {
        production.insert("migrations", Item::ArrayOfTables(ArrayOfTables::new()));
    }
    let array = production["migrations"].as_array_of_tables_mut().ok_or_else(bad)?;
    for m in added {
        let mut t = Table::new();
        t.insert("tag", toml_edit::value(m.tag.as_str()));
        for (key, classes) in [("new_classes", &m.new_classes), ("new_sqlite_classes", &m.new_sqlite_classes)] {
            if !classes.is_empty() {
                let array: Array = classes.iter().map(String::as_str).collect();
                t.insert(key, Item::Value(Value::Array(array)));
            }
        }
        array.push(t);
    }
    Ok(())
}

/// The first table under [env.production] in file order: bindings come before migrations.
fn first_written_table(doc: &mut DocumentMut) -> Option<&mut Table> {
    let production = doc.get_mut("env")?.get_mut(PRODUCTION)?.as_table_mut()?;
    if production.contains_key("durable_objects") {
        let bindings = production["durable_objects"].get_mut("bindings")?;
        return bindings.as_array_of_tables_mut()?.iter_mut().next();
    }
    production.get_mut("migrations")?.as_array_of_tables_mut()?.iter_mut().next()
}

/// True when no table outside [env.production] comes after its header in the file.
fn production_is_last_table(doc: &DocumentMut) -> bool {
    let Some(position) =
        doc.get("env").and_then(|env| env.get(PRODUCTION)).and_then(Item::as_table).and_then(Table::position)
    else {
        return false;
    };
    let mut latest = None;
    latest_position(doc.as_table(), &mut latest, true);
    latest.is_none_or(|latest| latest <= position)
}

fn latest_position(table: &Table, latest: &mut Option<isize>, at_root: bool) {
    for (key, item) in table.iter() {
        let is_env = at_root && key == "env";
        match item {
            Item::Table(t) => {
                if is_env {
                    // Skip production's subtree; it is the one being written.
                    for (name, env) in t.iter() {
                        if let (false, Some(env)) = (name == PRODUCTION, env.as_table()) {
                            bump(latest, env.position());
                            latest_position(env, latest, false);
                        }
                    }
                } else {
                    bump(latest, t.position());
                    latest_position(t, latest, false);
                }
            }
            Item::ArrayOfTables(array) => {
                for t in array.iter() {
                    bump(latest, t.position());
                    latest_position(t, latest, false);
                }
            }
            _ => {}
        }
    }
}

fn bump(latest: &mut Option<isize>, position: Option<isize>) {
    if let Some(position) = position {
        *latest = Some(latest.map_or(position, |l| l.max(position)));
    }
}
