//! Who acts on a hand-off: its owner, or the machine that runs its session; an enrolled
//! machine's credential, which acts on no hand-off but on the machine routes; and a value kept
//! once per role.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Owner,
    Machine,
    /// An enrolled machine's credential (`handoff machine enrol`): one owner's, one machine
    /// name's. It takes only the routes that name it (`/v1/machine/…`), never an owner's or a
    /// hand-off's (`decider::admit_role`).
    Credential,
}

impl Role {
    /// Every role, owner first.
    pub const ALL: [Role; 3] = [Role::Owner, Role::Machine, Role::Credential];

    /// The role as the contract and the tokens write it (the serde name too).
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Owner => "owner",
            Role::Machine => "machine",
            Role::Credential => "credential",
        }
    }
}

/// One `T` for each role: the caps, counts and renderings that each role has apart, so one
/// role's never take the other's place.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PerRole<T> {
    pub owner: T,
    pub machine: T,
}

impl<T> PerRole<T> {
    pub fn new(owner: T, machine: T) -> PerRole<T> {
        PerRole { owner, machine }
    }
}

/// A credential never reaches a hand-off (`decider::admit_role`); were one to, it would count
/// as the machine it is.
impl<T> std::ops::Index<Role> for PerRole<T> {
    type Output = T;
    fn index(&self, role: Role) -> &T {
        match role {
            Role::Owner => &self.owner,
            Role::Machine | Role::Credential => &self.machine,
        }
    }
}

impl<T> std::ops::IndexMut<Role> for PerRole<T> {
    fn index_mut(&mut self, role: Role) -> &mut T {
        match role {
            Role::Owner => &mut self.owner,
            Role::Machine | Role::Credential => &mut self.machine,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_role_is_written_the_same_by_as_str_and_by_serde() {
        for role in Role::ALL {
            assert_eq!(serde_json::to_value(role).unwrap(), role.as_str());
        }
        assert_ne!(Role::Owner.as_str(), Role::Machine.as_str());
        assert_ne!(Role::Credential.as_str(), Role::Machine.as_str());
    }

    #[test]
    fn each_role_has_its_own_place() {
        let mut counts = PerRole::<usize>::default();
        counts[Role::Machine] += 2;
        counts[Role::Owner] += 1;
        assert_eq!((counts[Role::Owner], counts[Role::Machine]), (1, 2));
    }
}
