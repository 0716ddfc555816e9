//! placeholder: the edge worker is being built (issue 3).
