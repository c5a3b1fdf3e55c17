package bus

// The bus's own tests reach the connection and lease handles that its
// API keeps to itself.
var (
	Connect  = connect
	NewLease = newLease
)
