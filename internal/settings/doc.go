// Package settings reads the settings of schedulers, stoppers and search
// algorithms, and reports what is wrong with them in one shape and one
// wording.
//
// A setting's reader is its typed config struct: Decode takes a mapping as
// a YAML or JSON decoder yields it and fills the struct's fields by their
// json names, checking each value's type: strings, booleans, integers,
// finite numbers, lists and pointers (optional values) of those, and
// structs, read from a mapping by the same rules. The struct's values
// before Decode are the defaults, a null value keeps the default, a field
// tagged `settings:"required"` must be given, and a field tagged
// `settings:"-"` is state, not a setting. What the plain fields cannot
// read (a value of another shape) the struct reads itself by implementing
// Custom, or its caller passes readers of those keys. Range rules stay
// with the config, in its Validate, written with Problems.Check.
//
// The experiment file is read the same way: internal/spec reads each
// section into its events struct with Decode.
//
// Every problem is an *Error at the dotted key of the experiment file
// ("tune_config.scheduler.max_t"), with the file and line when the spec
// parser knows them. Problems collects them, one per key: the first
// problem found at a key hides later ones, which usually follow from it.
//
// The package is pure: it does no I/O.
package settings
