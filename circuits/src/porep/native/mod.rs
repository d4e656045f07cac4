//! The PoRep C2 witness computed natively: every variable `StackedCircuit::synthesize`
//! allocates, in bellperson's order, element for element the witness-only synthesis of the
//! gadget circuit. SHA-256 is emitted word-wide (`sha256.rs`), Poseidon from its optimized
//! constants (`poseidon.rs`).

mod out;
mod poseidon;
mod sha256;
#[cfg(test)]
mod tests;
