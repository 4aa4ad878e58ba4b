//! The laws every kind's property tests check (test builds only): merging
//! is associative, commutative where the kind allows, the identity changes
//! nothing on either side, an encoding decodes to the same value, and a
//! refused operation changes nothing.

use proptest::prelude::*;

use crate::engine::aggregate::{Aggregate, Codec};

/// `a` merged with each of `rest`, in order.
pub(crate) fn merged<T: Aggregate>(a: &T, rest: &[&T]) -> T {
    let mut all = a.clone();
    for r in rest {
        all.merge(r).expect("merge within range");
    }
    all
}

/// (a·b)·c = a·(b·c); with `commutative`, also c·b·a; and the identity
/// merged on either side gives the value back.
pub(crate) fn check_merge<T: Aggregate>(
    a: &T,
    b: &T,
    c: &T,
    commutative: bool,
) -> Result<(), TestCaseError> {
    let ab_c = merged(a, &[b, c]);
    prop_assert_eq!(&ab_c, &merged(a, &[&merged(b, &[c])]), "not associative");
    if commutative {
        prop_assert_eq!(&ab_c, &merged(c, &[b, a]), "not commutative");
    }
    prop_assert_eq!(&merged(a, &[&T::identity()]), a, "identity on the right");
    prop_assert_eq!(&merged(&T::identity(), &[a]), a, "identity on the left");
    prop_assert!(T::identity().is_identity());
    Ok(())
}

/// None of `blobs` decodes as a `T`: each is refused as corrupt.
pub(crate) fn check_corrupt<T: Codec + std::fmt::Debug>(blobs: &[&[u8]]) {
    for bad in blobs {
        assert!(
            matches!(T::decode(bad), Err(crate::Error::Corrupt(_))),
            "{bad:?}"
        );
    }
}

/// Runs `op` on `v`: it must fail and leave `v` as it was (a refused
/// operation changes nothing). Its error.
pub(crate) fn refused<T: Clone + PartialEq + std::fmt::Debug>(
    v: &mut T,
    op: impl FnOnce(&mut T) -> crate::Result<()>,
) -> crate::Error {
    let before = v.clone();
    let err = op(v).expect_err("refused");
    assert_eq!(*v, before, "changed by a refused operation ({err})");
    err
}

/// [`refused`], the error saying the count would pass 2^53
/// ([`crate::Error::InvalidCount`]).
pub(crate) fn count_refused<T: Clone + PartialEq + std::fmt::Debug>(
    v: &mut T,
    op: impl FnOnce(&mut T) -> crate::Result<()>,
) -> crate::Error {
    let err = refused(v, op);
    assert!(matches!(err, crate::Error::InvalidCount(_)), "{err}");
    err
}

/// Decoding the encoding of `v` gives `v`.
pub(crate) fn check_round_trip<T: Aggregate + Codec>(v: &T) -> Result<(), TestCaseError> {
    prop_assert_eq!(&T::decode(&v.to_bytes()).expect("decodes"), v);
    Ok(())
}
