//! `settings!`: a table of settings declared once. Each setting is written one time — its doc,
//! its flag and environment twin (`#[arg]`), the type it is written in, the type a node uses,
//! its default, its check and any old names — and the macro makes the rest: the `*Args` struct
//! clap and the file's table fill (every field optional, so the layers can be told apart), the
//! resolved `*Config` struct, `merge` (flag and environment over the file) and `resolve`
//! (defaults, then each setting's check, then the table's own `check` across settings). The
//! file key is the field's name. `--help` shows each default and each old name.
//!
//! A setting reads
//! ```text
//! /// What it does.
//! #[arg(long = "synth-threads", env = "CUZK_SYNTH_THREADS")]
//! threads: usize = default_threads(), shown "all cores", check |n| *n >= 1 => "must be at least 1";
//! ```
//! with `: Written => Used` where a node uses another type than the one written
//! (`units::FromArg`), `also_env "NAME"` for a second environment name ranked with the first,
//! and `was "old-flag" "OLD_ENV" "old_key"` for names it had before. A default may use the
//! settings declared above it and the parameters of `resolve`. A `derived { name: Type = value; }`
//! block ends the table with fields a node uses that are made from several settings.

/// A setting's `--help`: its doc, its default and its old names.
pub fn help(doc: &[&str], default: Option<&str>, old: Option<(&str, &str)>) -> String {
    let mut help = doc
        .iter()
        .map(|line| line.trim())
        .collect::<Vec<_>>()
        .join(" ");
    if let Some(default) = default {
        help.push_str(&format!(" [default: {default}]"));
    }
    if let Some((flag, env)) = old {
        help.push_str(&format!(" (Was --{flag} and {env}; still accepted.)"));
    }
    help
}

/// The type a node uses: the declared one, or the written one.
macro_rules! used_type {
    ($written:ty) => {
        $written
    };
    ($written:ty, $used:ty) => {
        $used
    };
}
pub(crate) use used_type;

macro_rules! settings {
    (
        $(#[doc = $table_doc:literal])*
        table $table:literal: $args:ident => $config:ident
        $(resolve($($param:ident: $param_ty:ty),*))?
        {
            $(
                $(#[doc = $doc:literal])*
                #[arg($($arg:tt)*)]
                $name:ident: $written:ty $(=> $used:ty)? = $default:expr
                $(, shown $shown:literal)?
                $(, check $check:expr => $why:literal)?
                $(, also_env $also_env:literal)?
                $(, was $old_flag:literal $old_env:literal $old_key:literal)?
                ;
            )*
            $(
                derived {
                    $(
                        $(#[doc = $derived_doc:literal])*
                        $derived:ident: $derived_ty:ty = $derived_value:expr;
                    )*
                }
            )?
        }
    ) => {
        $(#[doc = $table_doc])*
        #[derive(clap::Args, Debug, Clone, Default, serde::Deserialize)]
        #[serde(deny_unknown_fields)]
        pub struct $args {
            $(
                #[arg(help = $crate::config::settings::help(
                    &[$($doc),*],
                    None $(.or(Some($shown)))?,
                    None $(.or(Some(($old_flag, $old_env))))?,
                ))]
                $(
                    #[arg(alias = $old_flag)]
                    #[serde(alias = $old_key)]
                )?
                // Named by table too: `cuzk local` flattens several tables into one command,
                // and two settings of one name there would share one value.
                #[arg(id = concat!($table, ".", stringify!($name)))]
                #[arg($($arg)*)]
                pub $name: Option<$written>,
            )*
        }

        #[derive(Debug, Clone, PartialEq, serde::Serialize)]
        pub struct $config {
            $(
                $(#[doc = $doc])*
                pub $name: $crate::config::settings::used_type!($written $(, $used)?),
            )*
            $($(
                $(#[doc = $derived_doc])*
                pub $derived: $derived_ty,
            )*)?
        }

        impl $args {
            /// Fills every setting the flags and environment left unset from the file's table.
            #[must_use]
            pub fn merge(mut self, file: $args) -> $args {
                $(
                    $(
                        if self.$name.is_none() {
                            self.$name = $crate::config::units::other_env($also_env, None);
                        }
                    )?
                    $(
                        if self.$name.is_none() {
                            self.$name = $crate::config::units::other_env(
                                $old_env,
                                Some(concat!($table, ".", stringify!($name))),
                            );
                        }
                    )?
                    if self.$name.is_none() {
                        self.$name = file.$name;
                    }
                )*
                self
            }

            /// Applies the defaults, then checks each setting and the table.
            pub fn resolve(self $($(, $param: $param_ty)*)?) -> Result<$config, $crate::config::ConfigError> {
                $(
                    let $name: $crate::config::settings::used_type!($written $(, $used)?) =
                        match self.$name {
                            Some(value) => $crate::config::units::FromArg::from_arg(value),
                            None => $default,
                        };
                    $(
                        if !$crate::config::units::holds(&$name, $check) {
                            return Err($crate::config::invalid(
                                concat!($table, ".", stringify!($name)),
                                $why,
                            ));
                        }
                    )?
                )*
                $($(let $derived: $derived_ty = $derived_value;)*)?
                let config = $config { $($name,)* $($($derived,)*)? };
                config.check()?;
                Ok(config)
            }
        }
    };
}
pub(crate) use settings;
