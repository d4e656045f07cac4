//! Emitters of the variables filecoin's gadgets allocate, computed natively: each writes, in
//! bellperson's allocation order, every value its gadget would, so a circuit's witness can be
//! generated without its constraint system. The PoRep (`porep/native/`) and PoSt
//! (`post/native.rs`) generators are built from them; `tests.rs` checks each emitter against
//! its gadget.

pub(crate) mod out;
pub(crate) mod paths;
pub(crate) mod poseidon;
pub(crate) mod sha256;
#[cfg(test)]
pub(crate) mod tests;
