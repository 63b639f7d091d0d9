//! Who acts on a hand-off: its owner, or the machine that runs its session.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Owner,
    Machine,
}

impl Role {
    /// The role as the contract and the tokens write it (the serde name too).
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Owner => "owner",
            Role::Machine => "machine",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_role_is_written_the_same_by_as_str_and_by_serde() {
        for role in [Role::Owner, Role::Machine] {
            assert_eq!(serde_json::to_value(role).unwrap(), role.as_str());
        }
        assert_ne!(Role::Owner.as_str(), Role::Machine.as_str());
    }
}
