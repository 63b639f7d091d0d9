//! `listed_enum!`: a plain enum together with `ALL`, every variant in declaration order. The
//! list is written by the macro from the declaration, so it cannot miss a variant.

/// Declares the enum as written and adds `pub const ALL: [Name; N]`.
#[macro_export]
macro_rules! listed_enum {
    ($(#[$meta:meta])* $vis:vis enum $name:ident { $($(#[$vmeta:meta])* $variant:ident),+ $(,)? }) => {
        $(#[$meta])*
        $vis enum $name { $($(#[$vmeta])* $variant),+ }

        impl $name {
            /// Every variant, in the order declared.
            pub const ALL: [$name; [$($name::$variant),+].len()] = [$($name::$variant),+];
        }
    };
}

#[cfg(test)]
mod tests {
    crate::listed_enum! {
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        enum Colour { Red, Green, Blue }
    }

    #[test]
    fn all_lists_every_variant_once_in_order() {
        assert_eq!(Colour::ALL, [Colour::Red, Colour::Green, Colour::Blue]);
    }
}
